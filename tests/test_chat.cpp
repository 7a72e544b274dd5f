// `kvscope chat`: a three-turn conversation with a test checkpoint given
// SmolLM2's ChatML template. Each turn's prompt is the whole conversation as
// the template renders it; the cache keeps the longest prefix it already
// holds (every position, where the tokens re-read the same), the prefill
// computes only the rest, and the reply equals the NumPy float64 greedy
// reference run on the whole prompt with a fresh cache.
#include <gtest/gtest.h>

#include <sstream>

#include "jinja_ref_util.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {
namespace {

using nlohmann::json;
using testutil::TempDir;

struct Turn {
  json start, prefill, reply;
  std::vector<int> tokens;  // the reply's tokens, the prefill's first
};

std::vector<Turn> parse_turns(const std::string& out) {
  std::vector<Turn> turns;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // stderr's notes ([chat] ...), merged in by run_kvscope
    const json j = json::parse(line);
    const std::string ev = j.at("event");
    if (ev == "turn") turns.push_back({j, {}, {}, {}});
    if (ev == "prefill") turns.back().prefill = j;
    if (ev == "prefill" || ev == "step") {
      EXPECT_EQ(j.at("turn"), turns.back().start.at("turn"));
      turns.back().tokens.push_back(j.at("token"));
    }
    if (ev == "reply") turns.back().reply = j;
  }
  return turns;
}

class Chat : public ::testing::Test {
 protected:
  TempDir tmp{"chat"};
  std::string dir = tmp / "model";
  void SetUp() override {
    testutil::run_numpy_ref(
        "make --out " + testutil::shell_quote(dir) + " --layers 2 --heads 2 --embd 32 --ctx 256 --vocab 320 --seed 11",
        tmp / "make.log");
    const std::string tpl =
        testutil::read_file(std::string(KVSCOPE_SOURCE_DIR) + "/tests/data/chat_templates/smollm2.jinja");
    testutil::write_file(dir + "/tokenizer_config.json",
                         json{{"eos_token", "<|im_end|>"}, {"chat_template", tpl}}.dump());
    testutil::write_file(tmp / "in.txt", "Hi there\nWhat is a cache?\n/reset\nAgain\nAnd once more\n");
  }
  std::vector<Turn> run(const std::string& flags) {
    std::string out;
    const int rc = testutil::run_kvscope(
        "chat --model " + dir + " --max-new 6 --json " + flags + " < " + (tmp / "in.txt"), out, tmp / "out.txt");
    EXPECT_EQ(rc, 0) << out;
    return parse_turns(out);
  }
};

TEST_F(Chat, EachTurnReusesTheCachedConversationAndAnswersAsAFreshCacheWould) {
  const std::vector<Turn> turns = run("");
  ASSERT_EQ(turns.size(), 4u);
  const Tokenizer tok = Tokenizer::load(dir);
  const ChatTemplate tpl = load_chat_template(dir, std::nullopt);
  std::vector<ChatMessage> messages;
  const char* users[] = {"Hi there", "What is a cache?", "Again", "And once more"};
  for (size_t k = 0; k < turns.size(); ++k) {
    SCOPED_TRACE("turn " + std::to_string(k + 1));
    const Turn& t = turns[k];
    if (k == 2) messages.clear();  // /reset
    messages.push_back({"user", users[k]});
    // The prompt is the rendered conversation, tokenized as is.
    const std::vector<int> ids = tok.encode(render_chat(tpl, messages, true, testutil::fixed_now()));
    ASSERT_EQ(t.prefill.at("tokens").get<std::vector<int>>(), ids);
    const int context = static_cast<int>(ids.size());
    EXPECT_EQ(t.start.at("context"), context);
    EXPECT_EQ(t.start.at("reused").get<int>() + t.start.at("prefilled").get<int>(), context);
    // Reused: the longest prefix of what the cache held (the last prompt and
    // the reply, less its last token, never fed back) that the new prompt
    // starts with; nothing after a /reset.
    int expect_reused = 0;
    if (k == 1 || k == 3) {
      std::vector<int> held = turns[k - 1].prefill.at("tokens").get<std::vector<int>>();
      held.insert(held.end(), turns[k - 1].tokens.begin(), turns[k - 1].tokens.end() - 1);
      while (expect_reused < static_cast<int>(held.size()) && expect_reused + 1 < context &&
             held[static_cast<size_t>(expect_reused)] == ids[static_cast<size_t>(expect_reused)]) {
        ++expect_reused;
      }
      EXPECT_GT(expect_reused, 0);  // at least the system prompt and the first turn
      EXPECT_EQ(t.start.at("diverged"), static_cast<int>(held.size()) - expect_reused);
    }
    EXPECT_EQ(t.start.at("reused"), expect_reused);
    // The forwards computed the prefilled positions, then one per step; NO
    // CACHE would have recomputed the whole conversation every step.
    const int n = static_cast<int>(t.tokens.size());
    EXPECT_EQ(t.reply.at("computed"), (context - expect_reused) + (n - 1));
    EXPECT_EQ(t.reply.at("no_cache").get<long long>(), static_cast<long long>(n) * context + n * (n - 1) / 2);
    // The same tokens as a fresh cache over the whole prompt (NumPy, float64).
    std::string id_list;
    for (int id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
    testutil::run_numpy_ref("ref --model " + dir + " --prompt " + id_list + " --steps " + std::to_string(n - 1) +
                                " --out " + (tmp / "ref.json"),
                            tmp / "ref.log");
    const json ref = testutil::read_json(tmp / "ref.json");
    const std::vector<int> ref_tokens = ref.at("tokens").get<std::vector<int>>();
    EXPECT_EQ(std::vector<int>(ref_tokens.begin() + context, ref_tokens.end()), t.tokens);
    messages.push_back({"assistant", tok.decode(t.tokens)});
    EXPECT_EQ(t.reply.at("text"), escape_invalid_utf8(tok.decode(t.tokens)));  // JSON text: invalid bytes as \xNN
  }
}

TEST_F(Chat, NoCacheAnswersTheSameAndReusesNothing) {
  const std::vector<Turn> kv = run("");
  const std::vector<Turn> nc = run("--no-cache");
  ASSERT_EQ(kv.size(), nc.size());
  for (size_t k = 0; k < kv.size(); ++k) {
    EXPECT_EQ(nc[k].tokens, kv[k].tokens);
    EXPECT_EQ(nc[k].start.at("reused"), 0);
    EXPECT_EQ(nc[k].reply.at("computed"), nc[k].reply.at("no_cache"));
  }
}

TEST_F(Chat, AConversationPastTheContextIsNamedAndOffersAChoice) {
  std::string lines;
  for (int k = 0; k < 12; ++k) lines += "Tell me a long story about caches, number " + std::to_string(k) + "\n";
  testutil::write_file(tmp / "long.txt", lines + "/drop\n/drop\n/drop\n/drop\n/drop\n/drop\nShort\n");
  std::string out;
  const int rc = testutil::run_kvscope("chat --model " + dir + " --max-new 4 < " + (tmp / "long.txt"), out, tmp);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("context holds 256 positions: start over, or drop the oldest turns"), std::string::npos) << out;
  EXPECT_NE(out.find("type /reset to start over, or /drop"), std::string::npos);
  EXPECT_NE(out.find("dropped the oldest turn"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
