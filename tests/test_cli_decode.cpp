// `kvscope generate --beams N` and `--draft DIR --speculate K` end to end:
// the JSON records are consistent with each other and with the other modes
// (--beams 1 and greedy speculation give --greedy's tokens), and flag
// combinations without a meaning exit 2 with a message naming the flag.

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "json_lines.h"
#include "model/tokenizer/tokenizer.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

std::string exe() {
  return std::string(KVSCOPE_BUILD_DIR) + "/kvscope";
}
std::string asset(const std::string& n) {
  return std::string(KVSCOPE_SOURCE_DIR) + "/assets/models/" + n;
}

struct CliRun {
  int rc = 0;
  std::string out, err;
  std::vector<json> events;
};

CliRun run(const std::string& args) {
  testutil::TempDir tmp("cli-decode");
  const std::string cmd = testutil::shell_quote(exe()) + " generate " + args + " > " +
                          testutil::shell_quote(tmp / "out") + " 2> " + testutil::shell_quote(tmp / "err");
  CliRun r;
  const int st = std::system(cmd.c_str());
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = testutil::read_file(tmp / "out");
  r.err = testutil::read_file(tmp / "err");
  r.events = testutil::json_records(r.out);
  return r;
}

std::vector<int> greedy_tokens(const std::string& prompt, int max_new) {
  const CliRun g =
      run("--prompt " + testutil::shell_quote(prompt) + " --greedy --json --max-new " + std::to_string(max_new));
  std::vector<int> toks;
  for (const json& e : g.events)
    if (e.at("event") != "done") toks.push_back(e.at("token").get<int>());
  return toks;
}

TEST(CliDecode, BeamJsonRecords) {
  ASSERT_TRUE(testutil::fs::exists(exe()));
  const CliRun r = run("--prompt 'Once upon a time' --beams 3 --max-new 10 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_GE(r.events.size(), 2u);
  EXPECT_EQ(r.events.front().at("event"), "prefill");
  size_t prev_beams = 1;
  for (size_t i = 0; i + 1 < r.events.size(); ++i) {
    const json& e = r.events[i];
    ASSERT_TRUE(e.contains("beams"));
    for (const json& b : e.at("beams")) {
      EXPECT_TRUE(b.contains("tokens") && b.contains("text") && b.contains("logprob") && b.contains("parent"));
      EXPECT_LT(b.at("parent").get<size_t>(), prev_beams);
      EXPECT_LE(b.at("logprob").get<double>(), 0.0);
    }
    EXPECT_EQ(e.at("candidates").size(), 6u);  // 2N
    EXPECT_LE(e.at("kv_bytes_shared").get<uint64_t>(), e.at("kv_bytes_independent").get<uint64_t>());
    prev_beams = std::max<size_t>(e.at("beams").size(), 1);
  }
  const json& done = r.events.back();
  EXPECT_EQ(done.at("event"), "done");
  ASSERT_FALSE(done.at("hypotheses").empty());
  EXPECT_EQ(done.at("text"), done.at("hypotheses").at(0).at("text"));
  EXPECT_DOUBLE_EQ(done.at("score").get<double>(), done.at("hypotheses").at(0).at("score").get<double>());
  for (size_t i = 1; i < done.at("hypotheses").size(); ++i)
    EXPECT_GE(done.at("hypotheses")[i - 1].at("score").get<double>(),
              done.at("hypotheses")[i].at("score").get<double>());
  // length_penalty 1: score = sum_logprob / generated length.
  const json& best = done.at("hypotheses").at(0);
  EXPECT_NEAR(best.at("score").get<double>(),
              best.at("sum_logprob").get<double>() / best.at("generated_length").get<double>(), 1e-9);
}

TEST(CliDecode, OneBeamEqualsGreedy) {
  for (const char* p : {"Once upon a time", "The capital of France is"}) {
    const CliRun r = run(std::string("--prompt '") + p + "' --beams 1 --max-new 16 --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.events.back().at("tokens").get<std::vector<int>>(), greedy_tokens(p, 16)) << p;
  }
}

TEST(CliDecode, SpeculativeJsonRecords) {
  const std::string draft = testutil::shell_quote(asset("kvscope-draft"));
  const CliRun r = run("--prompt 'Once upon a time' --draft " + draft + " --speculate 4 --max-new 24 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_GE(r.events.size(), 2u);
  std::vector<int> emitted, emitted_bytes;
  int drafted = 0, accepted = 0, forwards = 0;
  for (size_t i = 0; i + 1 < r.events.size(); ++i) {
    const json& e = r.events[i];
    EXPECT_EQ(e.at("event"), "iteration");
    EXPECT_EQ(e.at("target_forwards").get<int>(), ++forwards);
    ASSERT_EQ(e.at("emitted_pieces_bytes").size(), e.at("emitted").size());
    for (const json& b : e.at("emitted_pieces_bytes"))
      for (int v : b) emitted_bytes.push_back(v);
    for (const json& d : e.at("drafted")) EXPECT_TRUE(d.contains("p") && d.contains("q") && d.contains("token"));
    EXPECT_TRUE(e.contains("replacement") || e.contains("bonus"));
    drafted += e.at("k").get<int>();
    accepted += e.at("accepted").get<int>();
    for (int t : e.at("emitted")) emitted.push_back(t);
  }
  const json& done = r.events.back();
  EXPECT_EQ(done.at("event"), "done");
  EXPECT_EQ(emitted, greedy_tokens("Once upon a time", 24));
  ASSERT_EQ(done.at("reason"), "max_new");  // so the text is every emitted token's bytes, in order
  EXPECT_EQ(emitted_bytes, done.at("text_bytes").get<std::vector<int>>());
  EXPECT_TRUE(done.at("plain").at("same_tokens").get<bool>());
  EXPECT_EQ(done.at("drafted").get<int>(), drafted);
  EXPECT_EQ(done.at("accepted").get<int>(), accepted);
  EXPECT_NEAR(done.at("alpha").get<double>(), static_cast<double>(accepted) / drafted, 1e-12);
  EXPECT_NEAR(done.at("tokens_per_target_forward").get<double>(), 24.0 / forwards, 1e-12);
  // Leviathan, Kalman & Matias (2023), theorem 3.8: with acceptance rate a,
  // K drafted tokens and a draft forward costing c target forwards, the
  // expected speed-up is (1 + a + ... + a^K) / (K c + 1).
  const double a = done.at("alpha_tested").get<double>(), c = done.at("cost_ratio").get<double>();
  double tokens = 0;
  for (int i = 0; i <= 4; ++i) tokens += std::pow(a, i);
  EXPECT_GT(c, 0.0);
  EXPECT_NEAR(done.at("predicted_speedup").get<double>(), tokens / (4 * c + 1), 1e-9);
  // The measured speed-up: tokens per second against plain decoding's.
  EXPECT_NEAR(done.at("speedup").get<double>(),
              done.at("tokens_per_s").get<double>() / done.at("plain").at("tokens_per_s").get<double>(), 1e-9);
  EXPECT_NEAR(done.at("tokens_per_s").get<double>(),
              done.at("new_tokens").get<double>() / (done.at("ms_total").get<double>() / 1000.0), 1e-6);
  EXPECT_GT(done.at("ms_total").get<double>(), 0.0);
}

// Row format and pages combine with both strategies: greedy speculation on
// f16 paged caches writes what plain greedy decoding on the same layout
// writes, and beam search on f16 rows in blocks of 4 runs (its numbers are
// checked against the reference in test_beam.cpp).
TEST(CliDecode, KvDtypeAndBlockCombineWithBothStrategies) {
  const std::string kv = " --kv-dtype f16 --kv-block 8";
  const std::string draft = testutil::shell_quote(asset("kvscope-draft"));
  const CliRun spec = run("--prompt 'Once upon a time' --draft " + draft + " --speculate 3 --max-new 16 --json" + kv);
  ASSERT_EQ(spec.rc, 0) << spec.err;
  const CliRun plain = run("--prompt 'Once upon a time' --greedy --max-new 16 --json" + kv);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  std::vector<int> want, got;
  for (const json& e : plain.events)
    if (e.at("event") != "done") want.push_back(e.at("token").get<int>());
  for (const json& e : spec.events)
    if (e.at("event") == "iteration")
      for (int t : e.at("emitted")) got.push_back(t);
  EXPECT_EQ(got, want);
  const CliRun beams = run("--prompt 'Once upon a time' --beams 3 --max-new 8 --json --kv-dtype f16 --kv-block 4");
  ASSERT_EQ(beams.rc, 0) << beams.err;
  EXPECT_EQ(beams.events.back().at("event"), "done");
}

TEST(CliDecode, UsageErrors) {
  const std::string draft = testutil::shell_quote(asset("kvscope-draft"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--beams 4 --temperature 0.7", "--temperature"},
      {"--beams 4 --top-k 5", "--top-k"},
      {"--beams 4 --no-cache", "--no-cache"},
      {"--beams 0", "--beams"},
      {"--beams 9", "--beams"},
      {"--beams 2 --draft " + draft, "--draft"},
      {"--length-penalty 2", "--length-penalty"},
      {"--speculate 4", "--speculate"},
      {"--draft " + draft + " --speculate 17", "--speculate"},
      {"--draft " + draft + " --no-cache", "--no-cache"},
      {"--beams 2 --kv-window 8", "--kv-window"},
      {"--beams 2 --kv-window 8 --kv-sinks 2", "--kv-window"},
      {"--draft " + draft + " --kv-window 8", "--kv-window"},
  };
  for (const auto& [args, flag] : cases) {
    const CliRun r = run("--prompt hi " + args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << "\n" << r.err;
  }
}

TEST(CliDecode, DraftWithAnotherTokenizerIsRefused) {
  const std::string other = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const CliRun r = run("--prompt hi --draft " + testutil::shell_quote(other) + " --speculate 2");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(other), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kvscope-tiny"), std::string::npos) << r.err;
}

// The stop-token rule (a token of eos_token_id ends the text and is not part
// of it) for every strategy and output form. A copy of the shipped model
// whose eos_token_id lists "." too stops at the first "." the greedy run
// writes: plain and speculative decoding, streamed text and the JSON "text",
// all equal the tokenizer's decoding of the greedy tokens before the stop
// token (the greedy token ids from --greedy --json); beam search's best
// hypothesis, which ends on a stop id, prints its tokens less that one.
TEST(CliDecode, AStopTokenEndsTheTextForEveryStrategyAndOutput) {
  testutil::TempDir tmp("cli-stop");
  const std::string dir = tmp / "tiny-dot";
  testutil::fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    testutil::fs::copy_file(asset("kvscope-tiny") + "/" + f, dir + "/" + f);
  const Tokenizer tok = Tokenizer::load(dir);
  const std::vector<int> dot = tok.encode(".");
  ASSERT_EQ(dot.size(), 1u);
  json cfg = testutil::read_json(dir + "/config.json");
  const int eot = cfg.at("eos_token_id").get<int>();
  cfg["eos_token_id"] = {eot, dot[0]};
  testutil::write_file(dir + "/config.json", cfg.dump());
  const std::string m = " --model " + testutil::shell_quote(dir) + " --prompt 'Once upon a time' --max-new 300";
  const CliRun greedy = run(m + " --greedy --json");
  ASSERT_EQ(greedy.rc, 0) << greedy.err;
  std::vector<int> toks;
  for (const json& e : greedy.events)
    if (e.at("event") != "done") toks.push_back(e.at("token").get<int>());
  ASSERT_EQ(greedy.events.back().at("reason"), "eos");
  ASSERT_EQ(toks.back(), dot[0]);
  toks.pop_back();  // the stop token is not text
  const std::string want = tok.decode(toks);
  const std::string draft = " --draft " + testutil::shell_quote(asset("kvscope-draft")) + " --speculate 4";
  for (const std::string& strategy : {std::string(" --greedy"), draft}) {
    const CliRun text = run(m + strategy);
    ASSERT_EQ(text.rc, 0) << strategy << text.err;
    EXPECT_EQ(text.out, want + "\n") << strategy;
    const CliRun js = run(m + strategy + " --json");
    ASSERT_EQ(js.rc, 0) << strategy << js.err;
    EXPECT_EQ(js.events.back().at("text").get<std::string>(), want) << strategy;
    EXPECT_EQ(js.events.back().at("reason"), "eos") << strategy;
  }
  // Beam search: the best hypothesis ends on one of the stop ids (eos: true);
  // its text, printed and in the JSON, is its tokens less that last one.
  const CliRun beam_js = run(m + " --beams 2 --json");
  ASSERT_EQ(beam_js.rc, 0) << beam_js.err;
  const json& done = beam_js.events.back();
  std::vector<int> best = done.at("tokens").get<std::vector<int>>();
  ASSERT_TRUE(done.at("hypotheses").at(0).at("eos").get<bool>());
  ASSERT_FALSE(best.empty());
  EXPECT_TRUE(best.back() == eot || best.back() == dot[0]) << best.back();
  best.pop_back();
  EXPECT_EQ(done.at("text").get<std::string>(), tok.decode(best));
  const CliRun beam_text = run(m + " --beams 2");
  ASSERT_EQ(beam_text.rc, 0) << beam_text.err;
  EXPECT_EQ(beam_text.out, tok.decode(best) + "\n");
  // The shipped model's own <|endoftext|> is never printed by speculation either.
  const CliRun spec = run("--prompt 'Once upon a time' --max-new 300" + draft);
  ASSERT_EQ(spec.rc, 0) << spec.err;
  EXPECT_EQ(spec.out.find("<|endoftext|>"), std::string::npos) << spec.out;
}

// `generate --draft` with a model whose config.json sets its own
// sliding_window (Mistral's, W = 8), as the target or as the draft, past the
// window with rejected drafts: exit 0, and the tokens (iterations' `emitted`)
// and text are plain greedy decoding's with the target's window (which
// test_spec_decode.cpp checks against the float64 NumPy reference).
TEST(CliDecode, SpeculationOnModelsWithTheirOwnWindow) {
  const std::string suite = testutil::llama_suite_dir();
  const std::string windowed = suite + "/mistral_gqa4_bf16_untied_window";
  const std::string plain = suite + "/llama_gqa1_f32_tied_single";
  for (const auto& [target, draft] : {std::pair{windowed, plain}, std::pair{plain, windowed}}) {
    const std::string m = "--model " + testutil::shell_quote(target) + " --prompt 'one two three' --max-new 24";
    const CliRun g = run(m + " --greedy --json");
    ASSERT_EQ(g.rc, 0) << g.err;
    std::vector<int> want;
    for (const json& e : g.events)
      if (e.at("event") != "done") want.push_back(e.at("token").get<int>());
    ASSERT_EQ(want.size(), 24u);
    const CliRun r = run(m + " --draft " + testutil::shell_quote(draft) + " --speculate 4 --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    std::vector<int> got;
    int drafted = 0, accepted = 0;
    for (const json& e : r.events) {
      if (e.at("event") != "iteration") continue;
      for (int t : e.at("emitted").get<std::vector<int>>()) got.push_back(t);
      drafted += e.at("k").get<int>();
      accepted += e.at("accepted").get<int>();
    }
    EXPECT_EQ(got, want) << target;
    EXPECT_LT(accepted, drafted) << target << ": no draft was rejected";
    EXPECT_EQ(r.events.back().at("text"), g.events.back().at("text")) << target;
  }
}

// A speculative run that drafts nothing (--max-new 1: the one new token is
// the target's) has no acceptance rate, cost ratio or prediction: "n/a" in
// the summary and null in the JSON, never 0.
TEST(CliDecode, NothingDraftedIsNotAlphaZero) {
  const std::string draft = " --draft " + testutil::shell_quote(asset("kvscope-draft"));
  const CliRun r = run("--prompt 'Once upon a time' --max-new 1" + draft);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("alpha n/a (accepted 0 of 0 drafted)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("predict n/a from alpha n/a"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cost ratio n/a"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("0.000"), std::string::npos) << r.err;
  const CliRun j = run("--prompt 'Once upon a time' --max-new 1 --json" + draft);
  ASSERT_EQ(j.rc, 0) << j.err;
  const json& done = j.events.back();
  EXPECT_EQ(done.at("drafted").get<int>(), 0);
  for (const char* k : {"alpha", "alpha_tested", "draft_forward_ms", "cost_ratio", "predicted_speedup"})
    EXPECT_TRUE(done.at(k).is_null()) << k;
}

// A random draft sharing the suite target's tokenizer and vocabulary.
std::string suite_draft(const testutil::TempDir& tmp, const std::string& target, const std::string& shape) {
  const json cfg = testutil::read_json(target + "/config.json");
  const std::string dir = tmp / "draft";
  testutil::run_numpy_ref("make --out " + testutil::shell_quote(dir) + " " + shape + " --vocab " +
                              std::to_string(cfg.at("vocab_size").get<int>()) + " --tokenizer-dir " +
                              testutil::shell_quote(target),
                          tmp / "draft.log");
  return dir;
}

// A draft whose context (8 positions) is shorter than the prompt drafts
// nothing: the run says so once on stderr, and in the JSON records.
TEST(CliDecode, ADraftOutOfContextIsNamed) {
  testutil::TempDir tmp("cli-short-draft");
  const std::string target = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string draft = suite_draft(tmp, target, "--layers 1 --heads 2 --embd 32 --ctx 8");
  const std::string args = "--model " + testutil::shell_quote(target) + " --draft " + testutil::shell_quote(draft) +
                           " --prompt 'one two three four five six seven eight nine ten' --max-new 4";
  const CliRun r = run(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("note: the draft " + draft + " holds 8 positions"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the target decodes alone"), std::string::npos) << r.err;
  const CliRun j = run(args + " --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  ASSERT_GE(j.events.size(), 2u);
  EXPECT_TRUE(j.events.front().at("draft_context_full").get<bool>());
  EXPECT_EQ(j.events.front().at("k").get<int>(), 0);
}

// --kv-dtype q8_0 where the draft's K/V rows (not the target's) are no
// multiple of 32: the message says it is the draft's, naming its folder.
TEST(CliDecode, ALayoutTheDraftCannotHoldNamesTheDraft) {
  testutil::TempDir tmp("cli-draft-q8");
  const std::string target = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string draft = suite_draft(tmp, target, "--layers 1 --heads 1 --embd 16 --ctx 64");
  const CliRun r = run("--model " + testutil::shell_quote(target) + " --prompt hi --kv-dtype q8_0 --draft " +
                       testutil::shell_quote(draft));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("the draft " + draft + ": --kv-dtype q8_0: the K/V row has 16 values"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace kvscope
