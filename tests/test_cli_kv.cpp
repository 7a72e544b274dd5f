// The KV flags of `kvscope generate` and `kvscope eval`, end to end: JSON
// records against the float64 reference under the same layout, exact
// counters, usage errors naming the flag and its range, eval's errors.

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

// Runs the CLI; returns the exit code, stdout+stderr in `out` (numpy_ref_util.h).
int (*const run)(const std::string&, std::string&, const testutil::TempDir&) = testutil::run_kvscope;

TEST(CliKV, GenerateJsonUnderALayoutMatchesNumpy) {
  testutil::TempDir tmp("cli-kv");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  std::shared_ptr<const Model> m = load_model(dir);
  const std::string text = "The quick brown fox jumps";
  const std::vector<int> ids = m->tokenizer.encode(text);  // the tokenizer has its own reference tests
  std::string id_list;
  for (int t : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(t);
  testutil::run_numpy_ref("ref --model " + dir + " --prompt " + id_list +
                              " --steps 8 --kv-dtype f16 --kv-window 5 --kv-sinks 1 --out " + (tmp / "ref.json"),
                          tmp / "ref.log");
  const json ref = testutil::read_json(tmp / "ref.json");
  const int n_prompt = static_cast<int>(ids.size());
  for (const char* mode : {"", " --no-cache"}) {
    std::string out;
    ASSERT_EQ(run("generate --model " + dir + " --prompt " + testutil::shell_quote(text) +
                      " --max-new 9 --greedy --json --kv-dtype f16 --kv-window 5 --kv-sinks 1 --kv-block 2" + mode,
                  out, tmp),
              0)
        << out;
    std::istringstream lines(out);
    std::string line;
    int s = 0;
    int blocks_seen = 0;
    bool clear = true;
    int compared = 0;
    while (std::getline(lines, line)) {
      const json e = json::parse(line);
      if (e.at("event") == "done") break;
      const json& st = ref.at("steps").at(static_cast<size_t>(s));
      const int T = n_prompt + s;
      // Compare tokens while neither a greedy near-tie nor a quantization decision near a
      // rounding boundary could part the f32 run from the float64 one.
      clear = clear && st.at("margin").get<double>() >= 1e-3 && st.at("qmargin").get<double>() >= 3e-4;
      if (clear) {
        ++compared;
        EXPECT_EQ(e.at("token").get<int>(), st.at("token").get<int>()) << mode << " step " << s;
        EXPECT_NEAR(e.at("prob").get<double>(), st.at("prob").get<double>(), 1e-4) << mode << " step " << s;
      }
      if (*mode == '\0') {
        EXPECT_EQ(e.at("kv_positions").get<int>(), std::min(T, 6)) << s;
        EXPECT_EQ(e.at("evicted").get<int>(), s == 0 ? T - std::min(T, 6) : (T > 6 ? 1 : 0)) << s;
        const int blocks = e.at("kv_blocks").get<int>();
        EXPECT_EQ(e.at("kv_bytes").get<uint64_t>(), static_cast<uint64_t>(blocks) * 2 * 2 * 2 * (32 * 2)) << s;
        EXPECT_EQ(e.at("kv_slots_wasted").get<int>(), blocks * 2 - std::min(T, 6)) << s;
        blocks_seen = std::max(blocks_seen, blocks);
      } else {
        EXPECT_EQ(e.at("kv_bytes").get<uint64_t>(), 0u);
        EXPECT_EQ(e.at("kv_positions").get<int>(), 0);
      }
      ++s;
    }
    EXPECT_EQ(s, 9) << out;
    EXPECT_GE(compared, 3) << "steps clear of ties to compare";
    if (*mode == '\0') {
      EXPECT_LE(blocks_seen, 4) << "evicted blocks go back to the pool";
    }
  }
}

TEST(CliKV, BadFlagsAreUsageErrorsNamingTheFlag) {
  testutil::TempDir tmp("cli-kv-bad");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-window 0", "--kv-window"},
      {"--kv-window -2", "--kv-window"},
      {"--kv-sinks -1 --kv-window 4", "--kv-sinks"},
      {"--kv-window 4 --kv-sinks 4", "--kv-sinks"},
      {"--kv-sinks 2", "--kv-sinks"},
      {"--kv-block 0", "--kv-block"},
      {"--kv-dtype q5_1", "--kv-dtype"},
      {"--kv-window x", "--kv-window"},
  };
  for (const auto& [flags, name] : cases) {
    for (const char* sub : {"generate --prompt hi", "eval --file x"}) {
      std::string out;
      EXPECT_EQ(run(std::string(sub) + " --model " + dir + " " + flags, out, tmp), 2)
          << sub << " " << flags << ": " << out;
      EXPECT_NE(out.find(name), std::string::npos) << out;
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
    }
  }
  // A layout the model cannot hold (rows of 48 values are no multiple of 32): a runtime error naming the flag.
  std::string out;
  EXPECT_EQ(run("generate --prompt hi --kv-dtype q4_0 --model " + testutil::suite_checkpoint("l3h4d48_f16_noprefix"),
                out, tmp),
            1)
      << out;
  EXPECT_NE(out.find("multiple of 32"), std::string::npos) << out;
}

TEST(CliKV, EvalScoresATextAndComparesWithDense) {
  testutil::TempDir tmp("cli-eval");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  testutil::write_file(tmp / "t.txt",
                       "The quick brown fox jumps over the lazy dog.<|endoftext|>A KV cache stores keys.");
  std::string out;
  ASSERT_EQ(run("eval --json --model " + dir + " --file " + (tmp / "t.txt"), out, tmp), 0) << out;
  const json d = json::parse(out);
  EXPECT_GT(d.at("predicted_tokens").get<int>(), 10);
  EXPECT_NEAR(d.at("perplexity").get<double>(), std::exp(d.at("nll_per_token").get<double>()), 1e-9);
  EXPECT_FALSE(d.contains("kl_dense_variant")) << "the default layout is the dense one";
  ASSERT_EQ(run("eval --json --model " + dir + " --file " + (tmp / "t.txt") + " --kv-window 64", out, tmp), 0) << out;
  const json w = json::parse(out);
  // The window covers the whole context (64 positions): the same numbers, nothing differs.
  EXPECT_EQ(w.at("nll_per_token").get<double>(), d.at("nll_per_token").get<double>());
  EXPECT_EQ(w.at("kl_dense_variant").get<double>(), 0.0);
  EXPECT_EQ(w.at("top1_agreement").get<double>(), 100.0);
  EXPECT_EQ(w.at("max_abs_dlogit").get<double>(), 0.0);
  ASSERT_EQ(
      run("eval --json --model " + dir + " --file " + (tmp / "t.txt") + " --kv-dtype q4_0 --kv-window 3", out, tmp), 0)
      << out;
  const json q = json::parse(out);
  EXPECT_GT(q.at("kl_dense_variant").get<double>(), 0.0);
  EXPECT_GT(q.at("max_abs_dlogit").get<double>(), 0.0);
  // A percentage of the predicted positions: 100 * agreeing / predicted, so
  // predicted * top1 / 100 is a whole count between 0 and predicted.
  const double predicted = q.at("predicted_tokens").get<double>();
  const double agreeing = predicted * q.at("top1_agreement").get<double>() / 100.0;
  EXPECT_NEAR(agreeing, std::round(agreeing), 1e-6);
  EXPECT_GE(agreeing, 0.0);
  EXPECT_LE(agreeing, predicted);
  EXPECT_EQ(q.at("kv_bytes_per_position").get<uint64_t>(), 2u * 2 * 18);

  testutil::write_file(tmp / "empty.txt", "");
  testutil::write_file(tmp / "bad.txt", std::string("ok \xC3\x28 no", 8));
  for (const std::string& f : {tmp / "missing.txt", tmp / "empty.txt", tmp / "bad.txt"}) {
    EXPECT_EQ(run("eval --model " + dir + " --file " + f, out, tmp), 1) << out;
    EXPECT_NE(out.find(f), std::string::npos) << out;
  }
  // Only end-of-text markers: tokens are scored, but there are no text bytes,
  // so bits per byte is undefined (null, "-"), never 0.
  testutil::write_file(tmp / "eot.txt", "<|endoftext|><|endoftext|>");
  ASSERT_EQ(run("eval --json --model " + dir + " --file " + (tmp / "eot.txt"), out, tmp), 0) << out;
  EXPECT_TRUE(json::parse(out).at("bits_per_byte").is_null()) << out;
  ASSERT_EQ(run("eval --model " + dir + " --file " + (tmp / "eot.txt"), out, tmp), 0) << out;
  EXPECT_NE(out.find("bits / byte        - (no text bytes"), std::string::npos) << out;
}

// --kv-block has one range, 1..the model's context (n_positions from its
// config.json), for every command and strategy: beyond it, a usage error
// (exit 2) naming the flag and that range, before anything runs.
TEST(CliKV, KvBlockBeyondTheContextIsAUsageErrorEverywhere) {
  testutil::TempDir tmp("cli-kv-block");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const int ctx = testutil::read_json(dir + "/config.json").at("n_positions").get<int>();
  const std::string range = "1.." + std::to_string(ctx);
  testutil::write_file(tmp / "t.txt", "The quick brown fox.");
  testutil::write_file(tmp / "r.jsonl", "{\"id\": \"a\", \"prompt\": \"hi\", \"max_new\": 2}\n");
  const std::string m = " --model " + dir;
  std::vector<std::string> cmds = {
      "generate --prompt hi" + m,
      "generate --prompt hi --beams 2" + m,
      "generate --prompt hi --draft " + dir + m,
      "eval --file " + (tmp / "t.txt") + m,
      "bench --reps 1 --lengths 8" + m,
      "serve --requests " + (tmp / "r.jsonl") + m,
  };
#ifdef KVSCOPE_TESTS_RENDERER
  for (const char* strategy : {"", " --beams 2", " --draft "}) {
    const std::string draft = std::string(strategy) == " --draft " ? dir : "";
    cmds.push_back("render --prompt hi --steps 2 --width 320 --height 180 --out " + (tmp / "r.png") + strategy + draft +
                   m);
  }
#endif
  for (const std::string& cmd : cmds) {
    for (const int block : {ctx + 1, 1000000}) {
      std::string out;
      EXPECT_EQ(run(cmd + " --kv-block " + std::to_string(block), out, tmp), 2) << cmd << ": " << out;
      EXPECT_NE(out.find("--kv-block: " + std::to_string(block) + " is outside " + range), std::string::npos)
          << cmd << ": " << out;
    }
    std::string out;
    EXPECT_EQ(run(cmd + " --kv-block " + std::to_string(ctx), out, tmp), 0) << cmd << ": " << out;
  }
}

// eval on a file shorter than the context: the bytes held are those after
// the longest window scored, and it says how long that was (not the context).
TEST(CliKV, EvalNamesTheWindowItsKvBytesWereHeldAfter) {
  testutil::TempDir tmp("cli-eval-window");
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const json cfg = testutil::read_json(dir + "/config.json");
  const int ctx = cfg.at("n_positions").get<int>();
  testutil::write_file(tmp / "t.txt", "Short.");
  std::string out;
  ASSERT_EQ(run("eval --json --model " + dir + " --file " + (tmp / "t.txt"), out, tmp), 0) << out;
  const json j = json::parse(out);
  // The stream: <eos> the text's tokens <eos>, every token after the first predicted.
  const int positions = j.at("predicted_tokens").get<int>() + 1;
  ASSERT_LT(positions, ctx);
  EXPECT_EQ(j.at("kv_window_positions").get<int>(), positions);
  // Dense f32: 2 (K, V) x layers x n_embd x 4 bytes per position held.
  const uint64_t per = 2ull * cfg.at("n_layer").get<int>() * cfg.at("n_embd").get<int>() * 4;
  EXPECT_EQ(j.at("kv_bytes_full_window").get<uint64_t>(), per * static_cast<uint64_t>(positions));
  ASSERT_EQ(run("eval --model " + dir + " --file " + (tmp / "t.txt"), out, tmp), 0) << out;
  EXPECT_NE(out.find("held after the longest window scored (" + std::to_string(positions) + " of " +
                     std::to_string(ctx) + " positions)"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace kvscope
