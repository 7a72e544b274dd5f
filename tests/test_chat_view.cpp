// The chat view: its session and chat thread (app/session/session_chat.cpp,
// app/worker/chat_runner.h) on the embedded model with the built-in ChatML
// format, driven by the page's JSON commands; the counters it shows against
// the counting rules written out here and against `kvscope chat --json` run
// on the same input; and its scene (render/scene/scene_chat.h): who said each
// token, by substrings of the rendered text found here by hand, and the
// turn's reused / prefilled / reply spans.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "app/session/json_commands.h"
#include "app/session/session.h"
#include "model/chat/conversation.h"
#include "model/tokenizer/tokenizer.h"
#include "numpy_ref_util.h"
#include "render/scene/scene_chat.h"
#include "session_clock.h"

namespace kvscope {
namespace {

using nlohmann::json;

const std::string kTiny = std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/kvscope-tiny";
const char* const kSystem = "You are a helpful assistant.";
const char* const kAsk[] = {"What is the capital of France?", "And of Spain?"};

std::shared_ptr<const Model> tiny() {
  static auto m = load_model(kTiny);
  return m;
}

// ---------------------------------------------------------------------------
// Who said each token.

// `text` cut into pieces of `n` bytes (any cut: the tags follow bytes, not tokens).
std::vector<std::string> cut(const std::string& text, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); i += n) out.push_back(text.substr(i, n));
  return out;
}

TEST(ChatTags, ContentTakesItsRoleAndTheTemplatesTextIsMarked) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  // ChatML, written out: the markers and role headers are the template's.
  const std::string text =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello"
      "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";
  for (size_t n : {1, 3, 7}) {
    SCOPED_TRACE("pieces of " + std::to_string(n) + " bytes");
    const std::vector<std::string> pieces = cut(text, n);
    const std::vector<ChatTokenTag> tags = tag_chat_tokens(pieces, m);
    ASSERT_EQ(tags.size(), pieces.size());
    // Each byte's owner, found by hand.
    struct Owner {
      const char* content;
      ChatRole role;
      int message, turn;
    };
    const Owner owners[] = {{"Be brief.", ChatRole::kSystem, 0, 0},
                            {"Hi", ChatRole::kUser, 1, 1},
                            {"Hello", ChatRole::kAssistant, 2, 1},
                            {"Bye", ChatRole::kUser, 3, 2}};
    std::vector<ChatTokenTag> byte(text.size(), ChatTokenTag{ChatRole::kTemplate, 4, 2});  // the generation prompt
    size_t from = 0, header = 0;
    for (const Owner& o : owners) {
      const size_t at = text.find(o.content, from);
      for (size_t b = header; b < at; ++b) byte[b] = {ChatRole::kTemplate, o.message, o.turn};  // its header
      for (size_t b = at; b < at + std::string(o.content).size(); ++b) byte[b] = {o.role, o.message, o.turn};
      from = header = at + std::string(o.content).size();
    }
    for (size_t i = 0, b = 0; i < pieces.size(); b += pieces[i].size(), ++i) {
      // A piece with any content byte is that content's; else its first byte's owner (template text).
      ChatTokenTag want = byte[b];
      for (size_t k = b; k < b + pieces[i].size(); ++k)
        if (byte[k].role != ChatRole::kTemplate) want = byte[k];
      EXPECT_EQ(tags[i].role, want.role) << "piece " << i << " \"" << pieces[i] << "\"";
      EXPECT_EQ(tags[i].message, want.message) << "piece " << i;
      EXPECT_EQ(tags[i].turn, want.turn) << "piece " << i;
    }
  }
}

TEST(ChatTags, AContentTheTemplateChangedTagsNothingAndTheRestStillFollows) {
  // (a template that strips a message: " Hi " renders as "Hi", not found as given)
  const std::vector<ChatMessage> m = {{"user", " Hi "}, {"assistant", "Yo"}};
  const std::vector<ChatTokenTag> tags = tag_chat_tokens(cut("[U]Hi[A]Yo[A]", 1), m);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(tags[i].role, ChatRole::kTemplate) << i;
  EXPECT_EQ(tags[8].role, ChatRole::kAssistant);
  EXPECT_EQ(tags[9].role, ChatRole::kAssistant);
  EXPECT_EQ(tags[12].role, ChatRole::kTemplate);
  EXPECT_EQ(tags[12].message, 2);  // the reply's header
}

// ---------------------------------------------------------------------------
// The session, driven as the page drives it.

struct ChatRun {
  Session s;
  SessionClock clock{s};
  void cmd(const json& j) { s.execute(commands_from_json(j, s), clock.now()); }
  bool reply_done(size_t turns) {
    return clock.wait([&] {
      const ChatPub& p = s.engine.chat.pub;
      return p.turns.size() == turns && p.turns.back().done && !p.generating &&
             s.engine.chat.records_taken == p.records.size();
    });
  }
};

// The per-turn events of `kvscope chat --json`.
struct CliTurn {
  json start, reply;
  std::vector<int> prompt, tokens;
};
std::vector<CliTurn> cli_chat(const std::string& input, int max_new) {
  testutil::TempDir tmp("chat-view");
  testutil::write_file(tmp / "in.txt", input);
  std::string out;
  const int rc = testutil::run_kvscope("chat --model " + testutil::shell_quote(kTiny) +
                                           " --chat-format chatml --json --max-new " + std::to_string(max_new) +
                                           " --system " + testutil::shell_quote(kSystem) + " < " + (tmp / "in.txt"),
                                       out, tmp);
  EXPECT_EQ(rc, 0) << out;
  std::vector<CliTurn> turns;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const json j = json::parse(line);
    const std::string ev = j.at("event");
    if (ev == "turn") turns.push_back({j, {}, {}, {}});
    if (ev == "prefill") turns.back().prompt = j.at("tokens").get<std::vector<int>>();
    if (ev == "prefill" || ev == "step") turns.back().tokens.push_back(j.at("token"));
    if (ev == "reply") turns.back().reply = j;
  }
  return turns;
}

TEST(ChatSession, TheSecondTurnReusesTheFirstsCacheAsKvscopeChatDoes) {
  ChatRun r;
  r.s.load_model(kTiny);
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.model != nullptr; }));
  r.s.ui.chat_max_new = 24;
  r.cmd({{"cmd", "chat_system"}, {"text", kSystem}});
  r.cmd({{"cmd", "chat_format"}, {"format", "chatml"}});
  r.cmd({{"cmd", "chat_open"}});
  ASSERT_TRUE(r.s.ui.chat.open);
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.chat.pub.model != nullptr; })) << r.s.engine.chat.template_error;
  EXPECT_EQ(r.s.engine.chat.pub.origin, "built-in chatml");
  std::vector<std::vector<int>> tokens;  // each turn's, from the records the window took
  for (int k = 0; k < 2; ++k) {
    r.cmd({{"cmd", "chat_send"}, {"text", kAsk[k]}});
    // A second message while the reply is being generated is refused, and named.
    r.cmd({{"cmd", "chat_send"}, {"text", "too soon"}});
    ASSERT_FALSE(r.s.ui.errors.empty());
    EXPECT_NE(r.s.ui.errors.back().find("still being generated"), std::string::npos) << r.s.ui.errors.back();
    r.s.ui.errors.clear();
    ASSERT_TRUE(r.reply_done(static_cast<size_t>(k + 1)));
    tokens.emplace_back();
    for (const RecordPtr& rec : r.s.engine.chat.pub.records) tokens.back().push_back(rec->token);
  }
  EXPECT_TRUE(r.s.ui.errors.empty()) << r.s.ui.errors.front();
  const ChatState& c = r.s.engine.chat;
  ASSERT_EQ(c.pub.messages.size(), 5u);  // system, and two questions with their answers
  const std::vector<CliTurn> cli = cli_chat(std::string(kAsk[0]) + "\n" + kAsk[1] + "\n", 24);
  ASSERT_EQ(cli.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    SCOPED_TRACE("turn " + std::to_string(k + 1));
    const ChatTurn& t = c.pub.turns[k];
    // The window's tokens and counts are the CLI's for the same conversation.
    EXPECT_EQ(tokens[k], cli[k].tokens);
    EXPECT_EQ(t.start.reused, cli[k].start.at("reused"));
    EXPECT_EQ(t.start.prefilled, cli[k].start.at("prefilled"));
    EXPECT_EQ(t.start.context, cli[k].start.at("context"));
    EXPECT_EQ(t.end.computed, cli[k].reply.at("computed"));
    EXPECT_EQ(t.end.no_cache, cli[k].reply.at("no_cache"));
    EXPECT_EQ(t.end.text, c.pub.messages[2 + 2 * k].content);
    // The counting rules: the prefill computes what the cache does not hold,
    // then one position a step; NO CACHE the whole sequence every step.
    const int n = t.end.new_tokens, context = t.start.context;
    EXPECT_EQ(static_cast<int>(tokens[k].size()), n);
    EXPECT_EQ(t.start.reused + t.start.prefilled, context);
    EXPECT_EQ(t.end.computed, (context - t.start.reused) + (n - 1));
    EXPECT_EQ(t.end.no_cache, static_cast<long long>(n) * context + n * (n - 1) / 2);
  }
  // Turn 2 re-read turn 1 from the cache: the system prompt, the question and the answer (less its last token).
  EXPECT_EQ(c.pub.turns[0].start.reused, 0);
  EXPECT_GE(c.pub.turns[1].start.reused, cli[0].start.at("context").get<int>());
  EXPECT_LT(c.pub.turns[1].start.prefilled, c.pub.turns[1].start.reused);
  // The picture is the whole conversation: turn 2's prompt and reply, each token tagged.
  std::vector<int> all = cli[1].prompt;
  all.insert(all.end(), cli[1].tokens.begin(), cli[1].tokens.end());
  ASSERT_EQ(c.seq.tokens.size(), all.size());
  for (size_t p = 0; p < all.size(); ++p) EXPECT_EQ(c.seq.tokens[p].id, all[p]) << p;
  ASSERT_EQ(c.tags.size(), all.size());
  EXPECT_EQ(c.tags.front().role, ChatRole::kTemplate);  // <|im_start|>
  EXPECT_EQ(c.tags.back().role, ChatRole::kAssistant);
  EXPECT_EQ(c.tags.back().turn, 2);
  // Every position reused from turn 1 keeps the K norms turn 1 computed.
  for (int p = 0; p < c.pub.turns[1].start.reused; ++p) EXPECT_GE(c.seq.knorm(p, 0), 0.0f) << p;
  // The generation's keys do nothing while the chat is open (a stray R restarts nothing).
  const uint64_t conversation = c.pub.conversation;
  r.s.execute(Commands{cmd::Reset{}, cmd::PlayPause{}, cmd::Step{}, cmd::Scrub{1}}, r.clock.now());
  r.s.update(r.clock.now());
  EXPECT_FALSE(r.s.ui.playing);
  EXPECT_EQ(c.pub.conversation, conversation);
  EXPECT_EQ(c.pub.turns.size(), 2u);
  EXPECT_EQ(c.seq.tokens.size(), all.size());
}

TEST(ChatSession, AFullContextRefusesTheMessageUntilTheOldestTurnIsDropped) {
  ChatRun r;
  r.s.load_model(kTiny);
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.model != nullptr; }));
  r.s.ui.chat_max_new = 64;
  r.cmd({{"cmd", "chat_format"}, {"format", "chatml"}});
  r.cmd({{"cmd", "chat_open"}, {"open", true}});
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.chat.pub.model != nullptr; }));
  const std::string ask = "Tell me a long story about the cache, please, with every detail you know.";
  size_t turns = 0;
  for (int k = 0; k < 8 && r.s.engine.chat.pub.refused.empty(); ++k) {
    r.cmd({{"cmd", "chat_send"}, {"text", ask}});
    ASSERT_TRUE(r.clock.wait([&] { return !r.s.engine.chat.pub.generating; }));
    r.s.update(r.clock.now());
    turns = r.s.engine.chat.pub.turns.size();
  }
  const ChatPub& p = r.s.engine.chat.pub;
  ASSERT_EQ(p.refused, ask) << "the context never filled";
  EXPECT_GT(p.needed + 1, p.n_ctx);
  EXPECT_EQ(p.n_ctx, 256);
  EXPECT_EQ(r.s.ui.chat.input, ask);  // back in the box, to send again
  ASSERT_FALSE(r.s.ui.errors.empty());
  EXPECT_NE(r.s.ui.errors.back().find("context holds 256"), std::string::npos) << r.s.ui.errors.back();
  r.s.ui.errors.clear();
  const size_t before = p.messages.size();
  r.cmd({{"cmd", "chat_drop"}});
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.chat.pub.messages.size() == before - 2; }));
  EXPECT_TRUE(r.s.engine.chat.pub.refused.empty());
  r.cmd({{"cmd", "chat_send"}, {"text", "Short?"}});
  ASSERT_TRUE(r.reply_done(turns + 1));
  // What follows the dropped turn is computed again: only the system part (none here) can be reused.
  EXPECT_GT(r.s.engine.chat.pub.turns.back().start.prefilled, 0);
  r.cmd({{"cmd", "chat_reset"}});
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.chat.pub.turns.empty(); }));
  r.s.update(r.clock.now());
  EXPECT_TRUE(r.s.engine.chat.seq.tokens.empty());
  EXPECT_TRUE(r.s.ui.errors.empty()) << r.s.ui.errors.front();
}

TEST(ChatSession, AModelWithoutATemplateIsNamedAndTheCommandsAreChecked) {
  ChatRun r;
  r.s.load_model(kTiny);
  ASSERT_TRUE(r.clock.wait([&] { return r.s.engine.model != nullptr; }));
  r.cmd({{"cmd", "chat_open"}});
  // The embedded model ships no template: the panel names the override.
  EXPECT_NE(r.s.engine.chat.template_error.find("chatml"), std::string::npos) << r.s.engine.chat.template_error;
  r.cmd({{"cmd", "chat_send"}, {"text", "Hi"}});
  ASSERT_FALSE(r.s.ui.errors.empty());
  EXPECT_NE(r.s.ui.errors.back().find("no conversation is open"), std::string::npos);
  for (const json& bad : {json{{"cmd", "chat_format"}, {"format", "llama2"}}, json{{"cmd", "chat_send"}},
                          json{{"cmd", "chat_open"}, {"open", "yes"}}, json{{"cmd", "chat_send"}, {"txt", "x"}}}) {
    EXPECT_THROW(commands_from_json(bad, r.s), UsageError) << bad.dump();
  }
  try {
    commands_from_json({{"cmd", "chat_format"}, {"format", "llama2"}}, r.s);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("chatml|llama3|zephyr|mistral"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------
// The scene: a two-turn conversation run here by the Conversation itself.

TEST(ChatScene, TokensAreTintedByRoleAndTheTurnsSpansAreOnTheGround) {
  Conversation conv(tiny(), builtin_chat_template(ChatFormat::kChatML, {}), kSystem);
  GenerateOptions opt;
  opt.max_new = 8;
  SequenceState seq;
  std::vector<ChatTokenTag> tags;
  TurnStart t;
  std::vector<float> knorm_turn1;
  for (const char* ask : kAsk) {
    t = conv.begin_turn(ask, opt, std::tm{});
    bool first = true;
    while (RecordPtr r = conv.step()) {
      if (first) {
        std::vector<std::string> pieces;
        for (int id : r->prompt_tokens) pieces.push_back(tiny()->tokenizer.token_bytes(id));
        tags = tag_chat_tokens(pieces, conv.messages());
        first = false;
      }
      append_chat_record(seq, r);
      tags.resize(static_cast<size_t>(r->seq_len));
      tags.push_back(reply_token_tag(static_cast<int>(conv.messages().size()), t.turn, false));
      // Turn 2's prefill: the picture holds both turns, the reused positions resident.
      if (t.turn == 2 && r->prefill) {
        const Scene s = build_scene(seq, ViewOptions());
        for (const BlockInstance& b : s.kv)  // (the newest token's K/V are computed by the next step)
          EXPECT_EQ(b.state, b.pos < t.reused     ? KvState::kResident
                             : b.pos < r->seq_len ? KvState::kPrefill
                                                  : KvState::kEmpty)
              << b.pos;
        EXPECT_NE(s.banner_sub.find(std::to_string(t.reused) + " reused"), std::string::npos) << s.banner_sub;
        for (int p = 0; p < t.reused; ++p) EXPECT_FLOAT_EQ(seq.knorm(p, 1), knorm_turn1[static_cast<size_t>(p)]) << p;
      }
    }
    conv.end_turn();
    if (t.turn == 1)
      for (int p = 0; p < seq.seq_len(); ++p) knorm_turn1.push_back(seq.knorm(p, 1));
  }
  ViewOptions view;
  view.max_columns = 0;  // one block per position
  Scene s = build_scene(seq, view);
  add_chat_marks(s, ChatSceneInput{&tags, t.turn, t.reused, t.context});
  EXPECT_TRUE(s.chat);
  EXPECT_EQ(s.banner.rfind("CHAT \xC2\xB7 TURN 2", 0), 0u) << s.banner;
  int user = 0, assistant = 0, system = 0, marker = 0;
  for (const BlockInstance& b : s.tokens) {
    if (b.pos == s.slot) continue;
    const ChatRole role = tags[static_cast<size_t>(b.pos)].role;
    EXPECT_EQ(glm::vec3(b.colour), chat_role_colour(role)) << b.pos;
    user += role == ChatRole::kUser, assistant += role == ChatRole::kAssistant;
    system += role == ChatRole::kSystem, marker += role == ChatRole::kTemplate;
  }
  EXPECT_GT(user, 0);
  EXPECT_GT(assistant, 0);
  EXPECT_GT(system, 0);
  EXPECT_GT(marker, 0);
  // On the ground: the three spans, then a strip in its role's colour under
  // each message's content, a wall where each turn starts, each turn named.
  const int reply = s.slot + 1 - t.context;
  std::vector<std::string> captions;
  for (const Label& l : s.labels)
    if (l.kind == LabelKind::kCacheMark) captions.push_back(l.text);
  const std::vector<std::string> want = {"reused from the cache: " + std::to_string(t.reused),
                                         "prefilled this turn: " + std::to_string(t.prefilled),
                                         "reply: " + std::to_string(reply),
                                         "system prompt",
                                         "turn 1",
                                         "turn 2"};
  EXPECT_EQ(captions, want);
  std::vector<int> walls, want_walls;
  for (int p = 1; p <= s.slot; ++p)
    if (tags[static_cast<size_t>(p)].turn != tags[static_cast<size_t>(p) - 1].turn) want_walls.push_back(p);
  int strips = 0, content = 0;
  ASSERT_GE(s.cache_marks.size(), 3u);
  for (size_t i = 3; i < s.cache_marks.size(); ++i) {
    const BlockInstance& b = s.cache_marks[i];
    if (b.size.x < 0.1f) {  // a wall
      walls.push_back(b.pos);
      continue;
    }
    ++strips;
    for (int p = b.pos; p < b.pos + b.span; ++p) {
      EXPECT_EQ(glm::vec3(b.colour), chat_role_colour(tags[static_cast<size_t>(p)].role)) << p;
      EXPECT_NE(tags[static_cast<size_t>(p)].role, ChatRole::kTemplate) << p;
      ++content;
    }
  }
  EXPECT_EQ(walls, want_walls);
  EXPECT_EQ(walls.size(), 2u);  // turn 1 after the system prompt, turn 2 after the first answer
  EXPECT_EQ(strips, 5);         // system, user, assistant, user, assistant
  EXPECT_EQ(content, user + assistant + system + (tags[static_cast<size_t>(s.slot)].role != ChatRole::kTemplate));
  const BlockInstance* span = &s.cache_marks[0];
  EXPECT_EQ(span[0].pos, 0);
  EXPECT_EQ(span[0].span, t.reused);
  EXPECT_EQ(span[1].pos, t.reused);
  EXPECT_EQ(span[1].span, t.prefilled);
  EXPECT_EQ(span[2].pos, t.context);
  EXPECT_EQ(span[2].span, reply);
}

}  // namespace
}  // namespace kvscope
