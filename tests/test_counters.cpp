// Step counters against the fixed FLOP convention (docs/counting.md), KV bytes
// against what the cache holds, both cache modes giving identical tokens
// (greedy, seeded sampling, switching mid-way), and the stop conditions.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/engine/linear_kernels.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

const char* const kSmall = "l2h2d32_f32_prefix_buffers";  // 2 layers, d 32, ctx 64
const char* const kTiny = "l1h1d16_bf16_untied";          // 1 layer, d 16, ctx 32, untied head

// The convention written out independently of the engine: a forward over the
// new positions [first, seq_len) of a seq_len-long sequence, per layer
// 24*n*d^2 + 4*d*sum(L_i) with L_i = i + 1 (causal, itself included), plus the
// LM head 2*d*V for the last position only.
uint64_t expected_flops(const Config& c, int first, int seq_len) {
  const uint64_t d = c.n_embd, n = static_cast<uint64_t>(seq_len - first);
  uint64_t sum_l = 0;
  for (int i = first; i < seq_len; ++i) sum_l += static_cast<uint64_t>(i) + 1;
  return static_cast<uint64_t>(c.n_layer) * (24 * n * d * d + 4 * d * sum_l) + 2 * d * c.vocab_size;
}

uint64_t expected_kv_bytes(const Config& c, int positions) {
  return 2ull * c.n_layer * static_cast<uint64_t>(positions) * c.n_embd * 4ull;
}

std::shared_ptr<const Model> model(const char* name) {
  return load_model(testutil::suite_checkpoint(name));
}

std::vector<int> prompt_of(const char* name) {
  const auto suite = testutil::read_json(testutil::suite_dir() + "/suite.json");
  for (const auto& c : suite.at("checkpoints"))
    if (c.at("name") == name) return c.at("prompt").get<std::vector<int>>();
  throw std::runtime_error(std::string("no checkpoint ") + name);
}

SamplerSettings seeded() {
  SamplerSettings s;
  s.greedy = false;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.9f;
  s.seed = 1234;
  return s;
}

// Runs a generation; `mode_at(s)` picks the mode before step s.
template <class ModeAt>
std::vector<RecordPtr> run(Generator& gen, const std::vector<int>& prompt, GenerateOptions opt, ModeAt mode_at) {
  opt.mode = mode_at(0);
  gen.start_tokens(prompt, opt);
  std::vector<RecordPtr> out;
  for (int s = 0;; ++s) {
    gen.set_mode(mode_at(s));
    RecordPtr r = gen.step();
    if (!r) break;
    out.push_back(r);
    if (s > 10000) throw std::runtime_error("generation does not stop");
  }
  return out;
}

std::vector<int> tokens_of(const std::vector<RecordPtr>& recs) {
  std::vector<int> t;
  for (const auto& r : recs) t.push_back(r->token);
  return t;
}

TEST(Counters, FormulaHelperMatchesWorkedExamples) {
  const Config c = testutil::gpt2_124m_config();
  // KV decode at T: n = 1 attending to T. NO CACHE at T: n = T, sum = T(T+1)/2.
  for (int T : {1, 2, 17, 256, 1024}) {
    EXPECT_EQ(forward_flops(c, 1, T), expected_flops(c, T - 1, T)) << "T=" << T;
    EXPECT_EQ(forward_flops(c, T, T), expected_flops(c, 0, T)) << "T=" << T;
    const uint64_t d = 768, t = T;
    EXPECT_EQ(forward_flops(c, T, T), 12 * (24 * t * d * d + 4 * d * (t * (t + 1) / 2)) + 2 * d * 50257);
  }
  EXPECT_EQ(kv_bytes_per_position(c), 2ull * 12 * 768 * 4);
}

void check_counters(const std::vector<RecordPtr>& recs, const Generator& gen, const std::vector<CacheMode>& modes,
                    int n_prompt) {
  const Config& c = gen.model().config;
  uint64_t total = 0;
  double ms = 0;
  CacheMode prev = modes.at(0);
  for (size_t s = 0; s < recs.size(); ++s) {
    const StepRecord& r = *recs[s];
    const std::string where = "step " + std::to_string(s) + " (" + to_string(r.mode) + ")";
    const int T = n_prompt + static_cast<int>(s);  // positions in the sequence this forward
    ASSERT_EQ(r.seq_len, T) << where;
    EXPECT_EQ(r.mode, modes[s]) << where;
    if (s == 0) {
      // The prefill: the whole prompt in one pass, nothing computed before.
      EXPECT_TRUE(r.prefill) << where;
      EXPECT_EQ(r.first, 0);
      EXPECT_EQ(r.n_new, T);
      EXPECT_EQ(r.flops, expected_flops(c, 0, T)) << where;
      EXPECT_EQ(r.recomputed, 0) << where;
      EXPECT_FALSE(r.refill);
    } else if (r.mode == CacheMode::kKV && prev == CacheMode::kKV) {
      EXPECT_FALSE(r.refill) << where;
      EXPECT_EQ(r.first, T - 1) << where;
      EXPECT_EQ(r.n_new, 1) << where;
      EXPECT_EQ(r.flops, expected_flops(c, T - 1, T)) << where;
      EXPECT_EQ(r.recomputed, 0) << where;
    } else if (r.mode == CacheMode::kKV) {
      // After NO CACHE nothing is held: the cache is rebuilt for every position.
      EXPECT_TRUE(r.refill) << where;
      EXPECT_EQ(r.first, 0) << where;
      EXPECT_EQ(r.n_new, T) << where;
      EXPECT_EQ(r.flops, expected_flops(c, 0, T)) << where;
      EXPECT_EQ(r.recomputed, T - 1) << where;
    } else {
      EXPECT_FALSE(r.refill) << where;
      EXPECT_EQ(r.first, 0) << where;
      EXPECT_EQ(r.n_new, T) << where;
      EXPECT_EQ(r.flops, expected_flops(c, 0, T)) << where;
      EXPECT_EQ(r.recomputed, T - 1) << where;
    }
    total += r.flops;
    EXPECT_EQ(r.flops_total, total) << where;
    EXPECT_EQ(r.kv_bytes, r.mode == CacheMode::kKV ? expected_kv_bytes(c, T) : 0u) << where;
    // A forward's wall time, on a clock of nanosecond resolution: never 0.
    EXPECT_GT(r.ms, 0.0) << where;
    ms += r.ms;
    EXPECT_DOUBLE_EQ(r.ms_total, ms) << where;
    EXPECT_EQ(r.index, static_cast<int>(s)) << where;
    prev = r.mode;
  }
  EXPECT_EQ(gen.flops_total(), total);
  EXPECT_EQ(gen.cache().bytes(), recs.back()->kv_bytes) << "the last record's kv_bytes is what the cache holds";
  EXPECT_DOUBLE_EQ(gen.ms_total(), ms) << "the total is the sum of the forwards' times";
}

TEST(Counters, KVCacheDecode) {
  auto m = model(kSmall);
  const auto prompt = prompt_of(kSmall);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 12;
  std::vector<uint64_t> cache_bytes;
  opt.mode = CacheMode::kKV;
  gen.start_tokens(prompt, opt);
  std::vector<RecordPtr> recs;
  while (RecordPtr r = gen.step()) {
    recs.push_back(r);
    cache_bytes.push_back(gen.cache().bytes());
    EXPECT_EQ(gen.cache_length(), r->seq_len);
  }
  ASSERT_EQ(recs.size(), 12u);
  check_counters(recs, gen, std::vector<CacheMode>(recs.size(), CacheMode::kKV), static_cast<int>(prompt.size()));
  for (size_t s = 0; s < recs.size(); ++s) EXPECT_EQ(recs[s]->kv_bytes, cache_bytes[s]) << "step " << s;
  // KV decode FLOPs grow only through the attention term.
  const Config& c = m->config;
  EXPECT_EQ(recs[5]->flops - recs[4]->flops, static_cast<uint64_t>(c.n_layer) * 4 * c.n_embd);
}

TEST(Counters, NoCacheDecode) {
  auto m = model(kSmall);
  const auto prompt = prompt_of(kSmall);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 12;
  opt.mode = CacheMode::kNoCache;
  gen.start_tokens(prompt, opt);
  std::vector<RecordPtr> recs;
  while (RecordPtr r = gen.step()) {
    recs.push_back(r);
    EXPECT_EQ(gen.cache().bytes(), 0u) << "NO CACHE holds nothing between steps";
  }
  ASSERT_EQ(recs.size(), 12u);
  check_counters(recs, gen, std::vector<CacheMode>(recs.size(), CacheMode::kNoCache), static_cast<int>(prompt.size()));
}

TEST(Counters, SwitchingModes) {
  auto m = model(kSmall);
  const auto prompt = prompt_of(kSmall);
  const std::vector<int> pattern = {0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 1};
  std::vector<CacheMode> modes;
  for (int p : pattern) modes.push_back(p ? CacheMode::kNoCache : CacheMode::kKV);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = static_cast<int>(pattern.size());
  auto recs = run(gen, prompt, opt, [&](int s) { return modes.at(std::min<size_t>(s, modes.size() - 1)); });
  ASSERT_EQ(recs.size(), pattern.size());
  check_counters(recs, gen, modes, static_cast<int>(prompt.size()));
}

// Starting in NO CACHE and switching to KV refills the cache from scratch.
TEST(Counters, PrefillNoCacheThenKV) {
  auto m = model(kSmall);
  const auto prompt = prompt_of(kSmall);
  std::vector<CacheMode> modes = {CacheMode::kNoCache, CacheMode::kNoCache, CacheMode::kKV, CacheMode::kKV};
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 4;
  auto recs = run(gen, prompt, opt, [&](int s) { return modes.at(std::min<size_t>(s, modes.size() - 1)); });
  ASSERT_EQ(recs.size(), 4u);
  check_counters(recs, gen, modes, static_cast<int>(prompt.size()));
}

std::vector<int> generate_tokens(const char* name, GenerateOptions opt, const std::vector<int>& pattern) {
  auto m = model(name);
  Generator gen(m);
  auto recs = run(gen, prompt_of(name), opt,
                  [&](int s) { return pattern[s % pattern.size()] ? CacheMode::kNoCache : CacheMode::kKV; });
  return tokens_of(recs);
}

TEST(Counters, ModesAgreeGreedy) {
  for (const char* name : {kSmall, kTiny}) {
    GenerateOptions opt;
    opt.max_new = 20;
    const auto kv = generate_tokens(name, opt, {0});
    EXPECT_EQ(kv.size(), 20u);
    EXPECT_EQ(generate_tokens(name, opt, {1}), kv) << name;
    EXPECT_EQ(generate_tokens(name, opt, {0, 0, 1, 0, 1, 1, 1}), kv) << name;
    EXPECT_EQ(generate_tokens(name, opt, {1, 1, 0, 0, 0}), kv) << name;
  }
}

TEST(Counters, ModesAgreeSeededSampling) {
  for (const char* name : {kSmall, kTiny}) {
    GenerateOptions opt;
    opt.max_new = 24;
    opt.sampler = seeded();
    const auto kv = generate_tokens(name, opt, {0});
    EXPECT_EQ(kv.size(), 24u);
    EXPECT_EQ(generate_tokens(name, opt, {0}), kv) << name << ": same seed, same tokens";
    EXPECT_EQ(generate_tokens(name, opt, {1}), kv) << name;
    EXPECT_EQ(generate_tokens(name, opt, {0, 1, 1, 0, 0, 1}), kv) << name;
    EXPECT_EQ(generate_tokens(name, opt, {1, 0, 0, 0}), kv) << name;
    // The greedy run differs from the sampled one, and another seed gives other tokens.
    GenerateOptions other = opt;
    other.sampler.seed = 99;
    EXPECT_NE(generate_tokens(name, other, {0}), kv) << name;
  }
}

TEST(Counters, SampledRecordsCarryDraws) {
  auto m = model(kSmall);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 8;
  opt.sampler = seeded();
  auto recs = run(gen, prompt_of(kSmall), opt, [](int) { return CacheMode::kKV; });
  for (const auto& r : recs) {
    EXPECT_GE(r->draw, 0.0f);
    EXPECT_LT(r->draw, 1.0f);
    ASSERT_GE(r->top.size(), 10u);
    // The chosen token lies in the top-k (k = 40) of its distribution.
    EXPECT_GT(r->prob, 0.0f);
    for (size_t i = 1; i < r->top.size(); ++i) EXPECT_GE(r->top[i - 1].prob, r->top[i].prob);
  }
  GenerateOptions g;
  g.max_new = 3;
  Generator gen2(m);
  for (const auto& r : run(gen2, prompt_of(kSmall), g, [](int) { return CacheMode::kKV; })) EXPECT_EQ(r->draw, -1.0f);
}

// --- stop conditions -------------------------------------------------------

TEST(Stop, MaxNew) {
  auto m = model(kSmall);
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    for (int max_new : {1, 2, 5}) {
      Generator gen(m);
      GenerateOptions opt;
      opt.max_new = max_new;
      auto recs = run(gen, prompt_of(kSmall), opt, [&](int) { return mode; });
      ASSERT_EQ(static_cast<int>(recs.size()), max_new) << "a prefill and max_new - 1 steps";
      EXPECT_TRUE(gen.done());
      EXPECT_EQ(gen.reason(), StopReason::kMaxNew);
      EXPECT_EQ(recs.back()->stop, StopReason::kMaxNew);
      for (size_t i = 0; i + 1 < recs.size(); ++i) EXPECT_EQ(recs[i]->stop, StopReason::kNone);
      EXPECT_EQ(gen.n_generated(), max_new);
      EXPECT_EQ(gen.step(), nullptr);
      EXPECT_STREQ(to_string(gen.reason()), "max_new");
    }
  }
}

TEST(Stop, Eos) {
  // Make the token greedy picks at some step the EOS token of a copy of the checkpoint.
  auto m = model(kSmall);
  GenerateOptions opt;
  opt.max_new = 20;
  Generator probe(m);
  const auto toks = tokens_of(run(probe, prompt_of(kSmall), opt, [](int) { return CacheMode::kKV; }));
  ASSERT_EQ(toks.size(), 20u);
  const int eos = toks[6];
  const int at = static_cast<int>(std::find(toks.begin(), toks.end(), eos) - toks.begin());
  testutil::TempDir tmp("stop-eos");
  testutil::copy_checkpoint(kSmall, tmp.path());
  auto cfg = testutil::read_json(tmp / "config.json");
  cfg["eos_token_id"] = eos;
  testutil::write_file(tmp / "config.json", cfg.dump(2));
  auto m2 = load_model(tmp.path());
  ASSERT_EQ(m2->config.eos_token_id, eos);
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    Generator gen(m2);
    auto recs = run(gen, prompt_of(kSmall), opt, [&](int) { return mode; });
    ASSERT_EQ(static_cast<int>(recs.size()), at + 1) << "stops on the forward that chose EOS";
    EXPECT_EQ(recs.back()->token, eos);
    EXPECT_EQ(gen.reason(), StopReason::kEos);
    EXPECT_EQ(recs.back()->stop, StopReason::kEos);
    EXPECT_STREQ(to_string(StopReason::kEos), "eos");
    // The text leaves EOS out.
    const std::vector<int> before(toks.begin(), toks.begin() + at);
    EXPECT_EQ(gen.text(), m2->tokenizer.decode(before));
  }
}

TEST(Stop, ContextFull) {
  auto m = model(kTiny);
  const int n_ctx = m->config.n_positions;
  const auto prompt = prompt_of(kTiny);
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    Generator gen(m);
    GenerateOptions opt;
    opt.max_new = 1000;
    auto recs = run(gen, prompt, opt, [&](int) { return mode; });
    EXPECT_EQ(gen.reason(), StopReason::kContextFull) << to_string(mode);
    EXPECT_EQ(recs.back()->stop, StopReason::kContextFull);
    int max_seq = 0;
    for (const auto& r : recs) max_seq = std::max(max_seq, r->seq_len);
    // No forward beyond n_positions, and the context is used to its end: the
    // last forward sees all n_positions tokens (or, Hugging Face's convention,
    // n_positions - 1, the last token landing in the last slot). The token the
    // last forward chose is kept and never fed.
    EXPECT_LE(max_seq, n_ctx) << "no forward beyond n_positions";
    EXPECT_GE(max_seq, n_ctx - 1) << "the context is used to its end";
    EXPECT_EQ(static_cast<int>(gen.tokens().size()), max_seq + 1);
    EXPECT_EQ(recs.back()->seq_len, max_seq);
    EXPECT_EQ(gen.n_generated(), static_cast<int>(recs.size()));
    EXPECT_STREQ(to_string(StopReason::kContextFull), "context_full");
  }
}

TEST(Stop, PromptLimits) {
  auto m = model(kTiny);
  const int n_ctx = m->config.n_positions;
  Generator gen(m);
  GenerateOptions opt;
  EXPECT_THROW(gen.start_tokens({}, opt), Error);
  EXPECT_THROW(gen.start("", opt), Error);
  std::vector<int> too_long(n_ctx + 1, 5);
  EXPECT_THROW(gen.start_tokens(too_long, opt), Error);
  std::string long_text;
  for (int i = 0; i < 3 * n_ctx; ++i) long_text += "zq" + std::to_string(i) + " ";
  try {
    gen.start(long_text, opt);
    FAIL() << "a prompt longer than the context must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(n_ctx)), std::string::npos)
        << "message names the context length: " << e.what();
  }
  // A text prompt works end to end through the tokenizer.
  gen.start("The cache", opt);
  RecordPtr r = gen.step();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->prompt_tokens, m->tokenizer.encode("The cache"));
  EXPECT_EQ(gen.n_prompt(), static_cast<int>(r->prompt_tokens.size()));
}

TEST(Stop, StopString) {
  auto m = model(kSmall);
  const Tokenizer& tok = m->tokenizer;
  GenerateOptions opt;
  opt.max_new = 20;
  Generator probe(m);
  const auto toks = tokens_of(run(probe, prompt_of(kSmall), opt, [](int) { return CacheMode::kKV; }));
  // The first step i >= 3 whose text contains a fresh 1..2-byte string ending in the new token.
  std::string stop;
  int at = -1;
  for (int i = 3; i < 20 && at < 0; ++i) {
    const std::string prev = tok.decode(std::vector<int>(toks.begin(), toks.begin() + i));
    const std::string now = tok.decode(std::vector<int>(toks.begin(), toks.begin() + i + 1));
    for (size_t len = 1; len <= 2 && len <= now.size(); ++len) {
      const std::string cand = now.substr(now.size() - len);
      if (now.find(cand) == now.size() - len && prev.find(cand) == std::string::npos) {
        stop = cand;
        at = i;
        break;
      }
    }
  }
  ASSERT_GE(at, 0) << "no usable stop string in the greedy output";
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    Generator gen(m);
    GenerateOptions o = opt;
    o.stop = {"this string never appears \x01\x02", stop};
    auto recs = run(gen, prompt_of(kSmall), o, [&](int) { return mode; });
    ASSERT_EQ(static_cast<int>(recs.size()), at + 1) << "stops on the step that completes the stop string";
    EXPECT_EQ(gen.reason(), StopReason::kStop);
    EXPECT_EQ(recs.back()->stop, StopReason::kStop);
    const std::string full = tok.decode(std::vector<int>(toks.begin(), toks.begin() + at + 1));
    EXPECT_EQ(gen.text(), full.substr(0, full.find(stop))) << "text ends before the stop string";
    EXPECT_STREQ(to_string(StopReason::kStop), "stop");
  }
}

// `kvscope bench --json`: the FLOP ratio is the convention's, the bytes a
// decode step reads are the engine's count for that length, and the GB/s
// are those bytes over the measured step time (timings themselves are not
// checked here: speed belongs in benchmarks).
TEST(Counters, CliBenchJsonReportsConventionAndTraffic) {
  using testutil::json;
  const std::string exe = std::string(KVSCOPE_BUILD_DIR) + "/kvscope";
  ASSERT_TRUE(testutil::fs::exists(exe)) << exe << " not built (make test builds it with the tests)";
  const std::string dir = testutil::suite_checkpoint("l3h4d48_f16_noprefix");
  std::shared_ptr<const Model> m = load_model(dir);
  const Config& c = m->config;
  testutil::TempDir tmp("cli-bench");
  const std::string out = tmp / "bench.json";
  const std::string cmd = testutil::shell_quote(exe) + " bench --model " + testutil::shell_quote(dir) +
                          " --lengths 4 9 --reps 1 --json > " + testutil::shell_quote(out) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << testutil::read_file(out);
  const json j = json::parse(testutil::read_file(out));
  EXPECT_GE(j.at("threads").get<int>(), 1);
  EXPECT_GT(j.at("read_bandwidth_gb_per_s").get<double>(), 0.0);
  ASSERT_EQ(j.at("rows").size(), 2u);
  for (const json& r : j.at("rows")) {
    const int T = r.at("T").get<int>();
    EXPECT_DOUBLE_EQ(r.at("flop_ratio").get<double>(),
                     static_cast<double>(forward_flops(c, T, T)) / static_cast<double>(forward_flops(c, 1, T)));
    EXPECT_EQ(r.at("decode_read_bytes").get<uint64_t>(),
              forward_read_bytes(*m, kv_bytes_per_position(c) * static_cast<uint64_t>(T)));
    EXPECT_EQ(r.at("kv_flops").get<uint64_t>(), forward_flops(c, 1, T));
    EXPECT_EQ(r.at("no_cache_flops").get<uint64_t>(), forward_flops(c, T, T));
    const double ms = r.at("kv_decode_ms").get<double>();
    ASSERT_GT(ms, 0.0);
    EXPECT_NEAR(
        r.at("decode_gb_per_s").get<double>(),
        static_cast<double>(forward_read_bytes(*m, kv_bytes_per_position(c) * static_cast<uint64_t>(T))) / ms / 1e6,
        1e-9 * r.at("decode_gb_per_s").get<double>() + 1e-12);
    EXPECT_NEAR(r.at("time_ratio").get<double>(), r.at("no_cache_ms").get<double>() / ms, 1e-9);
  }
  // The by-hand byte count of test_teach, for this F16 checkpoint at T = 9: the matrices at 2 bytes, the
  // vectors (and ln_f, the wpe row) at 4, the token's wte row as stored (2).
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  EXPECT_EQ(forward_read_bytes(*m, 2 * L * 9 * d * 4), L * (12 * d * d * 2 + 13 * d * 4) +
                                                           static_cast<uint64_t>(c.vocab_size) * d * 2 + 3 * d * 4 +
                                                           d * 2 + 2 * L * 9 * d * 4);
}

// `kvscope bench --kernels --json`: every kernel at every n once, each rate
// positive, the peaks positive where the build has the instruction (speed
// itself belongs in benchmarks: docs/batching.md).
TEST(Counters, CliBenchKernelsReportsEveryKernelAtEveryN) {
  using testutil::json;
  const std::string exe = std::string(KVSCOPE_BUILD_DIR) + "/kvscope";
  ASSERT_TRUE(testutil::fs::exists(exe)) << exe << " not built (make test builds it with the tests)";
  testutil::TempDir tmp("cli-bench-kernels");
  const std::string out = tmp / "kernels.json";
  const std::string cmd =
      testutil::shell_quote(exe) + " bench --kernels --reps 1 --json > " + testutil::shell_quote(out) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << testutil::read_file(out);
  const json j = json::parse(testutil::read_file(out));
  std::map<std::string, std::vector<int>> ns;
  for (const json& r : j.at("rows")) {
    ns[r.at("kernel").get<std::string>()].push_back(r.at("n").get<int>());
    EXPECT_GT(r.at("gmacs").get<double>(), 0.0) << r.dump();
  }
  const std::vector<int> all{1, 2, 4, 8, 16};
  for (const char* k : {"f32 weights", "f16 weights", "bf16 weights"}) EXPECT_EQ(ns[k], all) << k;
  EXPECT_EQ(ns.count("bf16 dot products") > 0, linear_detail::kBf16DotKernel);
#ifdef __AVX512F__
  EXPECT_GT(j.at("fma_peak_gmacs").get<double>(), 0.0);
#endif
  EXPECT_EQ(j.at("bf16_dot_peak_gmacs").get<double>() > 0.0, linear_detail::kBf16DotKernel);
  // The decode-shaped products: 3 shapes x 4 types, each reading its blocks' bytes.
  ASSERT_EQ(j.at("decode_products").size(), 12u);
  for (const json& r : j.at("decode_products")) {
    EXPECT_GT(r.at("ms_n1").get<double>(), 0.0) << r.dump();
    EXPECT_GT(r.at("ms_n8").get<double>(), 0.0) << r.dump();
    const uint64_t numel = r.at("rows").get<uint64_t>() * r.at("cols").get<uint64_t>();
    const std::string t = r.at("type").get<std::string>();
    const uint64_t bytes = t == "F16"    ? 2 * numel
                           : t == "Q8_0" ? numel / 32 * 34
                           : t == "Q6_K" ? numel / 256 * 210
                                         : numel / 256 * 144;  // Q4_K
    EXPECT_EQ(r.at("bytes").get<uint64_t>(), bytes) << r.dump();
  }
}

}  // namespace
}  // namespace kvscope
