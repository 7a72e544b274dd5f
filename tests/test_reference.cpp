// The engine against an independent float64 NumPy forward (tools/numpy_ref.py),
// on random GPT-2 checkpoints it has never seen: F32/F16/BF16, with and without
// the `transformer.` prefix, with attn.bias/masked_bias buffers, an untied head.
// Greedy tokens must be identical; logits, top-k probabilities, attention rows
// and K/V rows within 1e-4, in KV CACHE mode, NO CACHE mode and when switching.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/numeric.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;

// Must equal numpy_ref.py's SUITE (checked by SuiteListsExpectedCheckpoints).
const char* const kCheckpoints[] = {
    "l2h2d32_f32_prefix_buffers",   "l3h4d48_f16_noprefix",          "l1h1d16_bf16_untied",
    "l2h4d64_f16_prefix_u8buffers", "l2h2d32_bf16_noprefix_buffers",
};

struct RefStep {
  int index = 0, seq_len = 0, token = 0, n_rows = 0;
  double prob = 0, margin = 0;
  std::vector<std::pair<int, double>> top;  // 20 best, best first
  std::vector<double> logits;               // (vocab)
  std::vector<double> attn;                 // (layer, head, n_rows, seq_len)
  std::vector<double> k, v;                 // (layer, n_rows, n_embd)
};

struct RefCase {
  std::string name, dir, dtype;
  bool untied = false;
  uint64_t n_params = 0;
  json config;
  std::vector<int> prompt, tokens;
  int n_steps = 0;
  std::vector<RefStep> steps;
};

RefCase load_case(const std::string& name) {
  const json suite = testutil::read_json(testutil::suite_dir() + "/suite.json");
  for (const json& c : suite.at("checkpoints")) {
    if (c.at("name") != name) continue;
    RefCase r;
    r.name = name;
    r.dir = testutil::suite_checkpoint(name);
    r.dtype = c.at("dtype");
    r.untied = c.at("untied");
    r.n_params = c.at("n_params");
    const json ref = testutil::read_json(r.dir + "/ref.json");
    r.config = ref.at("config");
    r.prompt = ref.at("prompt").get<std::vector<int>>();
    r.tokens = ref.at("tokens").get<std::vector<int>>();
    r.n_steps = ref.at("n_steps");
    for (const json& s : ref.at("steps")) {
      RefStep st;
      st.index = s.at("index");
      st.seq_len = s.at("seq_len");
      st.token = s.at("token");
      st.n_rows = s.at("n_rows");
      st.prob = s.at("prob");
      st.margin = s.at("margin");
      for (const json& t : s.at("top")) st.top.emplace_back(t.at(0).get<int>(), t.at(1).get<double>());
      st.logits = s.at("logits").get<std::vector<double>>();
      st.attn = s.at("attn").get<std::vector<double>>();
      st.k = s.at("k").get<std::vector<double>>();
      st.v = s.at("v").get<std::vector<double>>();
      r.steps.push_back(std::move(st));
    }
    return r;
  }
  throw std::runtime_error("checkpoint " + name + " not in suite.json");
}

int cfg_int(const json& c, const char* k) {
  return c.at(k).get<int>();
}

// Max |a - b| over two equally long ranges; sets `at` to the worst index.
template <class A, class B>
double max_abs_diff(const A& a, const B& b, size_t n, size_t* at = nullptr) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= worst)) {  // also catches NaN
      worst = std::isnan(d) ? INFINITY : d;
      if (at) *at = i;
    }
  }
  return worst;
}

// Top candidates: probabilities rank by rank within kTol, and the same tokens
// except where the reference itself has a near-tie between neighbours.
void expect_top_matches(const std::vector<Candidate>& top, const RefStep& ref, const std::string& where) {
  ASSERT_GE(top.size(), 10u) << where;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(top[i].prob, ref.top[i].second, kTol) << where << " rank " << i;
    const bool tie_before = i > 0 && std::fabs(ref.top[i - 1].second - ref.top[i].second) < 1e-5;
    const bool tie_after = std::fabs(ref.top[i + 1].second - ref.top[i].second) < 1e-5;
    if (!tie_before && !tie_after) {
      EXPECT_EQ(top[i].token, ref.top[i].first) << where << " rank " << i;
    }
  }
}

// The record of one generator step against reference step `s`.
void expect_record_matches(const StepRecord& rec, const RefCase& rc, int s, const std::string& where) {
  const RefStep& ref = rc.steps[s];
  const int L = cfg_int(rc.config, "n_layer"), H = cfg_int(rc.config, "n_head"), d = cfg_int(rc.config, "n_embd");
  EXPECT_EQ(rec.index, s) << where;
  EXPECT_EQ(rec.prefill, s == 0) << where;
  ASSERT_EQ(rec.seq_len, ref.seq_len) << where;
  EXPECT_EQ(rec.n_prompt, static_cast<int>(rc.prompt.size())) << where;
  ASSERT_EQ(rec.token, ref.token) << where << " (reference margin " << ref.margin << ")";
  EXPECT_NEAR(rec.prob, ref.prob, kTol) << where;
  expect_top_matches(rec.top, ref, where);
  if (s == 0) {
    EXPECT_EQ(rec.prompt_tokens, rc.prompt) << where;
    EXPECT_EQ(rec.prompt_pieces.size(), rc.prompt.size()) << where;
  }

  // Attention: the newest row always; every prompt row for the prefill.
  ASSERT_EQ(rec.n_layer, L) << where;
  ASSERT_EQ(rec.n_head, H) << where;
  ASSERT_GE(rec.n_rows, 1) << where;
  ASSERT_EQ(rec.attn.size(), static_cast<size_t>(L) * H * rec.n_rows * rec.seq_len) << where;
  if (s == 0) {
    EXPECT_EQ(rec.n_rows, ref.seq_len) << where;
  }
  const int rows = std::min(rec.n_rows, ref.n_rows);
  double worst = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < rows; ++r) {
        // Compare the last `rows` query rows of both.
        const int rec_row = rec.n_rows - rows + r, ref_row = ref.n_rows - rows + r;
        for (int key = 0; key < ref.seq_len; ++key) {
          const double want = ref.attn[((static_cast<size_t>(l) * H + h) * ref.n_rows + ref_row) * ref.seq_len + key];
          const double got = rec.attention(l, h, rec_row, key);
          worst = std::max(worst, std::isnan(got) ? INFINITY : std::fabs(got - want));
        }
      }
  EXPECT_LE(worst, kTol) << where << ": attention";

  // K/V rows new to the sequence, [seq_len - n_kv, seq_len), vs the reference rows.
  ASSERT_GE(rec.n_kv, 1) << where;
  ASSERT_EQ(rec.k.size(), static_cast<size_t>(L) * rec.n_kv * d) << where;
  ASSERT_EQ(rec.v.size(), rec.k.size()) << where;
  const int kv_rows = std::min(rec.n_kv, ref.n_rows);
  double worst_k = 0, worst_v = 0;
  for (int l = 0; l < L; ++l)
    for (int r = 0; r < kv_rows; ++r)
      for (int j = 0; j < d; ++j) {
        const size_t got_i = (static_cast<size_t>(l) * rec.n_kv + rec.n_kv - kv_rows + r) * d + j;
        const size_t ref_i = (static_cast<size_t>(l) * ref.n_rows + ref.n_rows - kv_rows + r) * d + j;
        worst_k = std::max(worst_k, std::fabs(static_cast<double>(rec.k[got_i]) - ref.k[ref_i]));
        worst_v = std::max(worst_v, std::fabs(static_cast<double>(rec.v[got_i]) - ref.v[ref_i]));
      }
  EXPECT_LE(worst_k, kTol) << where << ": K rows";
  EXPECT_LE(worst_v, kTol) << where << ": V rows";
}

enum class Schedule { kKV, kNoCache, kSwitch, kSwitchFromNoCache };

CacheMode mode_at(Schedule sc, int s) {
  switch (sc) {
    case Schedule::kKV:
      return CacheMode::kKV;
    case Schedule::kNoCache:
      return CacheMode::kNoCache;
    // KV prefill, then NO CACHE for a few steps, back to KV (a refill), ...
    case Schedule::kSwitch: {
      static const int pattern[] = {0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0};
      return pattern[s % 13] ? CacheMode::kNoCache : CacheMode::kKV;
    }
    case Schedule::kSwitchFromNoCache:
      return (s / 4) % 2 == 0 ? CacheMode::kNoCache : CacheMode::kKV;
  }
  return CacheMode::kKV;
}

const char* schedule_name(Schedule sc) {
  switch (sc) {
    case Schedule::kKV:
      return "kv_cache";
    case Schedule::kNoCache:
      return "no_cache";
    case Schedule::kSwitch:
      return "switching";
    case Schedule::kSwitchFromNoCache:
      return "switching_from_no_cache";
  }
  return "?";
}

void run_generator_against_reference(const std::string& name, Schedule sc) {
  const RefCase rc = load_case(name);
  std::shared_ptr<const Model> model = load_model(rc.dir);
  Generator gen(model);
  GenerateOptions opt;
  opt.max_new = rc.n_steps + 1;  // the prefill's token + n_steps
  opt.sampler.greedy = true;
  opt.mode = mode_at(sc, 0);
  gen.start_tokens(rc.prompt, opt);
  int s = 0;
  for (;; ++s) {
    gen.set_mode(mode_at(sc, s));
    RecordPtr rec = gen.step();
    if (!rec) break;
    ASSERT_LT(s, static_cast<int>(rc.steps.size())) << "more steps than max_new";
    const std::string where = name + " [" + schedule_name(sc) + "] step " + std::to_string(s);
    EXPECT_EQ(rec->mode, mode_at(sc, s)) << where;
    if (rec->mode == CacheMode::kKV && s > 0 && !rec->refill) {
      EXPECT_EQ(rec->n_new, 1) << where;
      EXPECT_EQ(rec->first, rec->seq_len - 1) << where;
    } else {
      EXPECT_EQ(rec->first, 0) << where;
      EXPECT_EQ(rec->n_new, rec->seq_len) << where;
    }
    expect_record_matches(*rec, rc, s, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(s, rc.n_steps + 1);
  EXPECT_TRUE(gen.done());
  EXPECT_EQ(gen.reason(), StopReason::kMaxNew);
  EXPECT_EQ(gen.tokens(), rc.tokens);
  EXPECT_EQ(gen.n_generated(), rc.n_steps + 1);
  EXPECT_EQ(gen.step(), nullptr);
}

class ReferenceP : public ::testing::TestWithParam<const char*> {};

TEST(Reference, SuiteListsExpectedCheckpoints) {
  const json suite = testutil::read_json(testutil::suite_dir() + "/suite.json");
  std::vector<std::string> names;
  for (const json& c : suite.at("checkpoints")) names.push_back(c.at("name"));
  EXPECT_EQ(names, std::vector<std::string>(std::begin(kCheckpoints), std::end(kCheckpoints)))
      << "update kCheckpoints when numpy_ref.py's SUITE changes";
}

TEST_P(ReferenceP, LoadsConfigAndWeights) {
  const RefCase rc = load_case(GetParam());
  std::shared_ptr<const Model> m = load_model(rc.dir);
  const Config& c = m->config;
  EXPECT_EQ(c.n_layer, cfg_int(rc.config, "n_layer"));
  EXPECT_EQ(c.n_head, cfg_int(rc.config, "n_head"));
  EXPECT_EQ(c.n_embd, cfg_int(rc.config, "n_embd"));
  EXPECT_EQ(c.n_positions, cfg_int(rc.config, "n_positions"));
  EXPECT_EQ(c.vocab_size, cfg_int(rc.config, "vocab_size"));
  EXPECT_EQ(c.eos_token_id, cfg_int(rc.config, "eos_token_id"));
  EXPECT_EQ(c.bos_token_id, cfg_int(rc.config, "bos_token_id"));
  EXPECT_FLOAT_EQ(c.layer_norm_epsilon, rc.config.at("layer_norm_epsilon").get<float>());
  EXPECT_EQ(m->stored_dtype, rc.dtype);
  EXPECT_EQ(m->n_params, rc.n_params);
  EXPECT_EQ(m->tokenizer.vocab_size(), c.vocab_size);
  EXPECT_EQ(m->tokenizer.token_id("<|endoftext|>"), c.eos_token_id);
  const Gpt2Weights& w = std::get<Gpt2Weights>(m->weights);
  const int d = c.n_embd;
  EXPECT_EQ(w.wte.rows, c.vocab_size);
  EXPECT_EQ(w.wte.cols, d);
  EXPECT_EQ(w.wpe.rows(), c.n_positions);
  ASSERT_EQ(static_cast<int>(w.layers.size()), c.n_layer);
  for (const Gpt2Layer& l : w.layers) {
    EXPECT_EQ(l.attn_w_t.rows, 3 * d);
    EXPECT_EQ(l.attn_w_t.cols, d);
    EXPECT_EQ(l.fc_w_t.rows, 4 * d);
    EXPECT_EQ(l.mlp_proj_w_t.cols, 4 * d);
  }
  if (rc.untied) {
    EXPECT_EQ(w.lm_head.rows, c.vocab_size);
    EXPECT_NE(&w.head(), &w.wte);
  } else {
    EXPECT_TRUE(w.lm_head.empty());
    EXPECT_EQ(&w.head(), &w.wte);
  }
  EXPECT_EQ(m->dir, rc.dir);
  EXPECT_EQ(m->name, GetParam());
}

// Engine::forward directly: full logits, every attention row of the prefill, K/V.
TEST_P(ReferenceP, EngineLogitsBothModes) {
  const RefCase rc = load_case(GetParam());
  std::shared_ptr<const Model> m = load_model(rc.dir);
  const int L = m->config.n_layer, H = m->config.n_head, d = m->config.n_embd, V = m->config.vocab_size;
  Engine eng(*m);
  KVCache cache(KVLayout::for_model(m->config));
  std::vector<int> tokens = rc.prompt;
  for (int s = 0; s <= rc.n_steps; ++s) {
    const RefStep& ref = rc.steps[s];
    ASSERT_EQ(static_cast<int>(tokens.size()), ref.seq_len);
    const int T = ref.seq_len;
    const std::string where = rc.name + " step " + std::to_string(s);

    // KV CACHE: the prompt in one pass, then one position per step.
    const int first = s == 0 ? 0 : T - 1;
    ForwardOutput kv = eng.forward(tokens, first, &cache, s == 0);
    ASSERT_EQ(static_cast<int>(kv.logits.size()), V) << where;
    size_t at = 0;
    EXPECT_LE(max_abs_diff(kv.logits, ref.logits, V, &at), kTol) << where << " KV logits at " << at;
    EXPECT_EQ(kv.first, first);
    EXPECT_EQ(kv.n_new, T - first);
    EXPECT_EQ(kv.seq_len, T);
    EXPECT_EQ(cache.length(0), T);
    ASSERT_EQ(kv.n_rows, s == 0 ? T : 1) << where;
    ASSERT_EQ(kv.attn.size(), static_cast<size_t>(L) * H * kv.n_rows * T);
    EXPECT_LE(max_abs_diff(kv.attn, ref.attn, kv.attn.size(), &at), kTol) << where << " KV attn at " << at;
    ASSERT_EQ(kv.k.size(), static_cast<size_t>(L) * kv.n_new * d);
    EXPECT_LE(max_abs_diff(kv.k, ref.k, kv.k.size()), kTol) << where << " KV k";
    EXPECT_LE(max_abs_diff(kv.v, ref.v, kv.v.size()), kTol) << where << " KV v";
    // The cache holds exactly those rows at their positions.
    std::vector<float> row(static_cast<size_t>(d));
    for (int l = 0; l < L; ++l)
      for (int r = 0; r < kv.n_new; ++r) {
        cache.read_row(l, cache.slot_of(0, first + r), false, row.data());
        for (int j = 0; j < d; ++j) ASSERT_EQ(row[j], kv.k[(static_cast<size_t>(l) * kv.n_new + r) * d + j]);
      }

    // NO CACHE: the whole sequence from scratch.
    ForwardOutput nc = eng.forward(tokens, 0, nullptr, false);
    EXPECT_LE(max_abs_diff(nc.logits, ref.logits, V, &at), kTol) << where << " NO CACHE logits at " << at;
    EXPECT_LE(max_abs_diff(nc.logits, kv.logits, V), kTol) << where << " modes differ";
    EXPECT_EQ(nc.n_new, T);
    ASSERT_EQ(nc.n_rows, 1) << where;
    ASSERT_EQ(nc.attn.size(), static_cast<size_t>(L) * H * T);
    // The newest row of the reference.
    double worst = 0;
    for (int lh = 0; lh < L * H; ++lh)
      for (int key = 0; key < T; ++key)
        worst = std::max(worst, std::fabs(nc.attn[static_cast<size_t>(lh) * T + key] -
                                          ref.attn[(static_cast<size_t>(lh) * ref.n_rows + ref.n_rows - 1) * T + key]));
    EXPECT_LE(worst, kTol) << where << " NO CACHE attn";
    ASSERT_EQ(nc.k.size(), static_cast<size_t>(L) * T * d);
    double worst_k = 0;
    for (int l = 0; l < L; ++l)
      for (int j = 0; j < d; ++j)
        worst_k = std::max(worst_k, std::fabs(nc.k[(static_cast<size_t>(l) * T + T - 1) * d + j] -
                                              ref.k[(static_cast<size_t>(l) * ref.n_rows + ref.n_rows - 1) * d + j]));
    EXPECT_LE(worst_k, kTol) << where << " NO CACHE k";
    if (s == 0) {
      ForwardOutput all = eng.forward(tokens, 0, nullptr, true);
      ASSERT_EQ(all.n_rows, T);
      EXPECT_LE(max_abs_diff(all.attn, ref.attn, all.attn.size()), kTol) << where << " NO CACHE all rows";
    }
    tokens.push_back(ref.token);
    if (HasFatalFailure()) return;
  }
}

TEST_P(ReferenceP, GreedyKVCache) {
  run_generator_against_reference(GetParam(), Schedule::kKV);
}
TEST_P(ReferenceP, GreedyNoCache) {
  run_generator_against_reference(GetParam(), Schedule::kNoCache);
}
TEST_P(ReferenceP, GreedySwitchingModes) {
  run_generator_against_reference(GetParam(), Schedule::kSwitch);
}
TEST_P(ReferenceP, GreedySwitchingFromNoCache) {
  run_generator_against_reference(GetParam(), Schedule::kSwitchFromNoCache);
}

INSTANTIATE_TEST_SUITE_P(NumpyRef, ReferenceP, ::testing::ValuesIn(kCheckpoints),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// The reference can also be produced for any checkpoint dir and prompt (ref
// mode), e.g. one written by `numpy_ref.py make` with other options.
TEST(Reference, RefModeOnFreshCheckpoint) {
  testutil::TempDir tmp("ref-mode");
  const std::string dir = tmp / "ckpt";
  testutil::run_numpy_ref("make --out " + dir +
                              " --layers 2 --heads 4 --embd 24 --ctx 40 --vocab 280 --dtype F16 "
                              "--untied --buffers --no-prefix --seed 7",
                          tmp / "make.log");
  const std::vector<int> prompt = {3, 141, 59, 26, 5, 35};
  testutil::run_numpy_ref("ref --model " + dir + " --prompt 3,141,59,26,5,35 --steps 12 --out " + (tmp / "ref.json"),
                          tmp / "ref.log");
  const json ref = testutil::read_json(tmp / "ref.json");
  std::shared_ptr<const Model> m = load_model(dir);
  EXPECT_EQ(m->stored_dtype, "F16");
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 13;
  gen.start_tokens(prompt, opt);
  int s = 0;
  while (RecordPtr r = gen.step()) {
    const json& st = ref.at("steps").at(s);
    // Without the margin guard of `suite`, only compare while the reference's choice is clear.
    if (st.at("margin").get<double>() < 1e-3) break;
    EXPECT_EQ(r->token, st.at("token").get<int>()) << "step " << s;
    EXPECT_NEAR(r->prob, st.at("prob").get<double>(), kTol) << "step " << s;
    gen.set_mode(s % 2 ? CacheMode::kKV : CacheMode::kNoCache);
    ++s;
  }
  EXPECT_GT(s, 0);
}

// End to end: `kvscope generate --json` on a checkpoint it has never seen,
// both modes, against the float64 reference for the same prompt ids.
TEST(Reference, CliGenerateJsonMatchesNumpy) {
  const std::string exe = std::string(KVSCOPE_BUILD_DIR) + "/kvscope";
  ASSERT_TRUE(testutil::fs::exists(exe)) << exe << " not built (make test builds it with the tests)";
  const std::string dir = testutil::suite_checkpoint("l3h4d48_f16_noprefix");
  std::shared_ptr<const Model> m = load_model(dir);
  const Config& c = m->config;
  const std::string prompt = "The quick brown fox jumps";
  const std::vector<int> ids = m->tokenizer.encode(prompt);  // the tokenizer has its own reference tests
  ASSERT_FALSE(ids.empty());
  std::string id_list;
  for (int t : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(t);
  testutil::TempDir tmp("cli-ref");
  const int n_new = 16;
  testutil::run_numpy_ref("ref --model " + dir + " --prompt " + id_list + " --steps " + std::to_string(n_new - 1) +
                              " --out " + (tmp / "ref.json"),
                          tmp / "ref.log");
  const json ref = testutil::read_json(tmp / "ref.json");
  for (const std::string mode_flag : {"", " --no-cache"}) {
    const std::string out = tmp / "out.jsonl";
    const std::string cmd = testutil::shell_quote(exe) + " generate --model " + testutil::shell_quote(dir) +
                            " --prompt " + testutil::shell_quote(prompt) + " --max-new " + std::to_string(n_new) +
                            " --greedy --json" + mode_flag + " > " + testutil::shell_quote(out) + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << testutil::read_file(out);
    std::istringstream lines(testutil::read_file(out));
    std::string line;
    std::vector<json> ev;
    while (std::getline(lines, line))
      if (!line.empty()) ev.push_back(json::parse(line));
    ASSERT_EQ(ev.size(), static_cast<size_t>(n_new + 1)) << "prefill, " << n_new - 1 << " steps, done";
    EXPECT_EQ(ev.front().at("event"), "prefill");
    EXPECT_EQ(ev.front().at("tokens").get<std::vector<int>>(), ids);
    EXPECT_EQ(ev.back().at("event"), "done");
    EXPECT_EQ(ev.back().at("reason"), "max_new");
    EXPECT_EQ(ev.back().at("new_tokens"), n_new);
    const bool kv = mode_flag.empty();
    uint64_t total = 0;
    for (int s = 0; s < n_new; ++s) {
      const json& e = ev[static_cast<size_t>(s)];
      const json& r = ref.at("steps").at(s);
      const std::string where = std::string(kv ? "kv" : "no-cache") + " event " + std::to_string(s);
      if (s > 0) {
        EXPECT_EQ(e.at("event"), "step") << where;
        EXPECT_EQ(e.at("index"), s) << where;
      }
      const int T = static_cast<int>(ids.size()) + s;
      const uint64_t flops = kv && s > 0 ? forward_flops(c, 1, T) : forward_flops(c, T, T);
      EXPECT_EQ(e.at("flops").get<uint64_t>(), flops) << where;
      total += flops;
      EXPECT_EQ(e.at("flops_total").get<uint64_t>(), total) << where;
      EXPECT_EQ(e.at("kv_bytes").get<uint64_t>(), kv ? kv_bytes_per_position(c) * T : 0u) << where;
      EXPECT_EQ(e.at("recomputed").get<int>(), kv || s == 0 ? 0 : T - 1) << where;
      // Past a near-tie the float64 and f32 continuations may part; stop comparing there.
      if (r.at("margin").get<double>() < 1e-3) break;
      EXPECT_EQ(e.at("token").get<int>(), r.at("token").get<int>()) << where;
      EXPECT_NEAR(e.at("prob").get<double>(), r.at("prob").get<double>(), kTol) << where;
      const json& top = e.at("top");
      ASSERT_GE(top.size(), 5u) << where;
      for (size_t i = 0; i < top.size() && i < 10; ++i)
        EXPECT_NEAR(top[i].at("prob").get<double>(), r.at("top").at(i).at(1).get<double>(), kTol) << where;
    }
  }
}

// f16 / bf16 decoding, including subnormals, infinities and rounding-free values.
TEST(Reference, HalfFloatConversions) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));             // smallest normal
  EXPECT_EQ(f16_to_f32(0x3555), 0.25f * (1.0f + 0x155 / 1024.0f));  // exponent 13 - 15, mantissa 0x155
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7C00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC0A0), -5.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isinf(bf16_to_f32(0xFF80)));
}

// Every f16 value against IEEE binary16's definition: (-1)^s x 2^(e-15) x
// 1.m for 0 < e < 31, 2^-14 x 0.m for e = 0, inf or NaN (payload kept) for e = 31.
TEST(Reference, F16ToF32MatchesTheDefinitionForEveryValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t s = h >> 15, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (e == 31) {
      uint32_t bits;
      std::memcpy(&bits, &got, 4);
      ASSERT_EQ(bits, (s << 31) | 0x7f800000u | (m << 13)) << std::hex << h;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(static_cast<double>(m), -24)
                              : std::ldexp(static_cast<double>(1024 + m), static_cast<int>(e) - 25);
    const double want = s ? -mag : mag;
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
    ASSERT_EQ(std::signbit(got), s == 1) << std::hex << h;
  }
}

// Every stored value reaches the engine unchanged (Conv1D (in, out) transposed
// to (out, in)): compare against the raw safetensors values.
TEST(Reference, WeightsTransposedFromConv1D) {
  const std::string dir = testutil::suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const SafeTensors st = SafeTensors::open(dir + "/model.safetensors");
  std::shared_ptr<const Model> m = load_model(dir);
  const int d = m->config.n_embd;
  const std::vector<float> c_attn = st.to_f32("transformer.h.1.attn.c_attn.weight");  // (d, 3d)
  ASSERT_EQ(c_attn.size(), static_cast<size_t>(d) * 3 * d);
  for (int i = 0; i < d; ++i)
    for (int o = 0; o < 3 * d; ++o)
      ASSERT_EQ(std::get<Gpt2Weights>(m->weights).layers[1].attn_w_t.at(o, i),
                c_attn[static_cast<size_t>(i) * 3 * d + o]);
  const std::vector<float> fc = st.to_f32("transformer.h.0.mlp.c_fc.weight");  // (d, 4d)
  for (int i = 0; i < d; ++i)
    for (int o = 0; o < 4 * d; ++o)
      ASSERT_EQ(std::get<Gpt2Weights>(m->weights).layers[0].fc_w_t.at(o, i), fc[static_cast<size_t>(i) * 4 * d + o]);
  const std::vector<float> wte = st.to_f32("transformer.wte.weight");
  for (int r = 0; r < m->config.vocab_size; ++r)
    for (int j = 0; j < d; ++j)
      ASSERT_EQ(std::get<Gpt2Weights>(m->weights).wte.at(r, j), wte[static_cast<size_t>(r) * d + j]);
  // The buffers are listed but not used.
  EXPECT_TRUE(st.has("transformer.h.0.attn.bias"));
  EXPECT_TRUE(st.has("transformer.h.0.attn.masked_bias"));
}

}  // namespace
}  // namespace kvscope
