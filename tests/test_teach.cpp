// The teaching logic, without GL: the KV memory calculator against
// the article's numbers and hand-computed published configurations; sampling
// made visible against an independent double-precision reference and against
// the tokens the engine's Sampler really picked; prefill vs decode from real
// records; the timeline's memory bound at the default model's full context;
// fork-and-reuse of the cache with exact FLOP savings; saved views.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine.h"
#include "error.h"
#include "generator.h"
#include "model.h"
#include "numpy_ref_util.h"
#include "sampler.h"
#include "teach_branch.h"
#include "teach_history.h"
#include "teach_kv.h"
#include "teach_phases.h"
#include "teach_sampling.h"
#include "teach_view.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Expects `f` to throw kvscope::Error whose message contains every needle.
template <class F>
void expect_error(F f, const std::vector<std::string>& needles, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << what << ": \"" << msg << "\" lacks \"" << n << "\"";
  }
}

// ---------------------------------------------------------------------------
// A random checkpoint of the default model's size (4 layers, 4 heads, 160
// wide, 256 positions, vocab 3257), written by tools/numpy_ref.py make into
// the build tree once (cached per content of the script, published by an
// atomic rename as the suite is). EOS is removed from its config so a
// generation runs to the end of the context.

const std::string& teach_checkpoint() {
  static const std::string dir = [] {
    const std::string args = "--layers 4 --heads 4 --embd 160 --ctx 256 --vocab 3257 --synthetic-vocab --seed 5";
    const std::string script = testutil::read_file(testutil::numpy_ref_script());
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(script + args));
    const fs::path root = fs::path(KVSCOPE_BUILD_DIR) / "test-data";
    fs::create_directories(root);
    const fs::path final_dir = root / (std::string("teach-") + hash);
    if (fs::exists(final_dir / "config.json")) return final_dir.string();
    const fs::path tmp = root / (std::string("teach-") + hash + ".tmp-" + std::to_string(getpid()));
    std::error_code ec;
    fs::remove_all(tmp, ec);
    testutil::run_numpy_ref("make --out " + testutil::shell_quote(tmp.string()) + " " + args,
                            (root / ("teach-log-" + std::to_string(getpid()) + ".txt")).string());
    json cfg = testutil::read_json((tmp / "config.json").string());
    cfg.erase("eos_token_id");
    cfg.erase("bos_token_id");
    testutil::write_file((tmp / "config.json").string(), cfg.dump(2));
    fs::remove(root / ("teach-log-" + std::to_string(getpid()) + ".txt"), ec);
    fs::rename(tmp, final_dir, ec);
    if (ec) fs::remove_all(tmp, ec);  // another process published it first
    if (!fs::exists(final_dir / "config.json"))
      throw std::runtime_error("teach checkpoint missing: " + final_dir.string());
    return final_dir.string();
  }();
  return dir;
}

std::shared_ptr<const Model> teach_model() {
  static std::shared_ptr<const Model> m = load_model(teach_checkpoint());
  return m;
}

std::vector<int> test_prompt(int n = 16) {
  std::vector<int> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 211 + 37) % 3000);
  return p;
}

std::vector<RecordPtr> run(Generator& gen, const std::vector<int>& prompt, GenerateOptions opt,
                           const std::function<CacheMode(int)>& mode_at = nullptr) {
  if (mode_at) opt.mode = mode_at(0);
  gen.start_tokens(prompt, opt);
  std::vector<RecordPtr> out;
  for (int s = 0;; ++s) {
    if (mode_at) gen.set_mode(mode_at(s));
    RecordPtr r = gen.step();
    if (!r) break;
    out.push_back(r);
    if (s > 100000) throw std::runtime_error("generation does not stop");
  }
  return out;
}

SamplerSettings sampled(uint64_t seed, float temp = 0.9f, int top_k = 40, float top_p = 0.9f, float pen = 1.3f) {
  SamplerSettings s;
  s.greedy = false;
  s.temperature = temp;
  s.top_k = top_k;
  s.top_p = top_p;
  s.repetition_penalty = pen;
  s.seed = seed;
  return s;
}

// ===========================================================================
// 1. KV memory calculator

const KvModelSpec& find_spec(const std::vector<KvModelSpec>& all, const std::string& name) {
  for (const KvModelSpec& m : all)
    if (m.name == name) return m;
  throw std::runtime_error("no config named " + name);
}

std::vector<KvModelSpec> shipped_configs() {
  return load_kv_configs(std::string(KVSCOPE_SOURCE_DIR) + "/assets/kv_configs.json");
}

TEST(KvCalc, ArticleExample) {
  // "32 layers x 4096 x 2 x 2 bytes = 512 KB per token, ~50 GB at 100K tokens."
  KvModelSpec m;
  m.layers = 32;
  m.query_heads = m.kv_heads = 32;
  m.head_dim = 128;  // 32 heads x 128 = 4096 wide
  EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kF16), 32ull * 4096 * 2 * 2);
  EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kF16), 524288u);
  EXPECT_EQ(format_bytes_binary(524288), "512 KiB");
  const uint64_t at_100k = kv_cache_bytes(m, 100000, KvDtype::kF16);
  EXPECT_EQ(at_100k, 100000ull * 524288);
  EXPECT_EQ(at_100k, 52428800000ull);
  EXPECT_EQ(format_bytes_decimal(static_cast<double>(at_100k)), "52.4 GB");
  EXPECT_EQ(format_bytes_binary(static_cast<double>(at_100k)), "48.8 GiB");  // "~50 GB" either way

  // The shipped table reproduces it with its 32-layer 4096-wide MHA entry.
  const std::vector<KvModelSpec> shipped = shipped_configs();  // find_spec returns a reference into it
  const KvModelSpec& mha = find_spec(shipped, "32-layer 4096-wide MHA (Llama-2-7B)");
  EXPECT_EQ(mha.hidden, 4096);
  EXPECT_EQ(kv_bytes_per_token(mha, KvDtype::kF16), 524288u);
  EXPECT_EQ(kv_cache_bytes(mha, 100000, KvDtype::kF16), 52428800000ull);
}

TEST(KvCalc, PublishedConfigsByHand) {
  const std::vector<KvModelSpec> all = shipped_configs();
  ASSERT_EQ(all.size(), 7u);
  struct Hand {
    const char* name;
    int layers, q, kv, hd, hidden, window;
    uint64_t fp16_per_token;  // 2 * layers * kv * hd * 2, multiplied out by hand
  };
  const Hand hand[] = {
      {"GPT-2 small", 12, 12, 12, 64, 768, 0, 36864},    // 2*12*12*64*2
      {"GPT-2 medium", 24, 16, 16, 64, 1024, 0, 98304},  // 2*24*16*64*2
      {"GPT-2 XL", 48, 25, 25, 64, 1600, 0, 307200},     // 2*48*25*64*2
      {"32-layer 4096-wide MHA (Llama-2-7B)", 32, 32, 32, 128, 4096, 0, 524288},
      {"Llama-3-8B", 32, 32, 8, 128, 4096, 0, 131072},   // 2*32*8*128*2
      {"Llama-3-70B", 80, 64, 8, 128, 8192, 0, 327680},  // 2*80*8*128*2
      {"Mistral-7B v0.1", 32, 32, 8, 128, 4096, 4096, 131072},
  };
  for (const Hand& h : hand) {
    const KvModelSpec& m = find_spec(all, h.name);
    EXPECT_EQ(m.layers, h.layers) << h.name;
    EXPECT_EQ(m.query_heads, h.q) << h.name;
    EXPECT_EQ(m.kv_heads, h.kv) << h.name;
    EXPECT_EQ(m.head_dim, h.hd) << h.name;
    EXPECT_EQ(m.hidden, h.hidden) << h.name;
    EXPECT_EQ(m.query_heads * m.head_dim, m.hidden) << h.name;
    EXPECT_EQ(m.sliding_window, h.window) << h.name;
    EXPECT_EQ(m.gqa(), h.kv < h.q) << h.name;
    EXPECT_EQ(m.source.rfind("https://", 0), 0u) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kF16), h.fp16_per_token) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kF32), 2 * h.fp16_per_token) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kInt8), h.fp16_per_token / 2) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KvDtype::kInt4), h.fp16_per_token / 4) << h.name;
  }
  // A few cache sizes multiplied out by hand.
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "GPT-2 small"), 1024, KvDtype::kF32), 75497472u);   // 73728 * 1024
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "Llama-3-8B"), 8192, KvDtype::kF16), 1073741824u);  // 1 GiB
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "Llama-3-70B"), 1000000, KvDtype::kF16), 327680000000ull);
  // Mistral's window: at 100K tokens the cache holds 4096 positions, 512 MiB.
  const KvModelSpec& mistral = find_spec(all, "Mistral-7B v0.1");
  EXPECT_EQ(cached_positions(mistral, 100000), 4096u);
  EXPECT_EQ(cached_positions(mistral, 4000), 4000u);
  EXPECT_EQ(kv_cache_bytes(mistral, 100000, KvDtype::kF16), 536870912u);
  EXPECT_EQ(kv_cache_bytes(mistral, 1000000, KvDtype::kF16), 536870912u);
  EXPECT_EQ(kv_cache_bytes(mistral, 4000, KvDtype::kF16), 4000ull * 131072);
  // GQA's saving, visible: Llama-3-8B holds a quarter of the same-width MHA model's cache.
  EXPECT_EQ(kv_bytes_per_token(find_spec(all, "32-layer 4096-wide MHA (Llama-2-7B)"), KvDtype::kF16),
            4 * kv_bytes_per_token(find_spec(all, "Llama-3-8B"), KvDtype::kF16));
}

// Parameter counts recomputed from the published shapes (independent of the file).
uint64_t gpt2_params(uint64_t L, uint64_t d) {
  const uint64_t V = 50257, ctx = 1024;
  // wte + wpe + per layer (2 LN, c_attn, c_proj, 2 LN, c_fc, mlp c_proj) + ln_f; head tied.
  return V * d + ctx * d + L * (4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)) +
         2 * d;
}
uint64_t llama_params(uint64_t L, uint64_t d, uint64_t kv_dim, uint64_t inter, uint64_t V) {
  // embed + untied head + per layer (q, k, v, o, gate/up/down, 2 RMSNorm) + final norm.
  return 2 * V * d + L * (2 * d * d + 2 * d * kv_dim + 3 * d * inter + 2 * d) + d;
}

TEST(KvCalc, ParamsMatchPublishedShapes) {
  const std::vector<KvModelSpec> all = shipped_configs();
  EXPECT_EQ(find_spec(all, "GPT-2 small").params, gpt2_params(12, 768));
  EXPECT_EQ(find_spec(all, "GPT-2 small").params, 124439808u);  // the well-known 124M
  EXPECT_EQ(find_spec(all, "GPT-2 medium").params, gpt2_params(24, 1024));
  EXPECT_EQ(find_spec(all, "GPT-2 XL").params, gpt2_params(48, 1600));
  EXPECT_EQ(find_spec(all, "32-layer 4096-wide MHA (Llama-2-7B)").params, llama_params(32, 4096, 4096, 11008, 32000));
  EXPECT_EQ(find_spec(all, "Llama-3-8B").params, llama_params(32, 4096, 1024, 14336, 128256));
  EXPECT_EQ(find_spec(all, "Llama-3-70B").params, llama_params(80, 8192, 1024, 28672, 128256));
  EXPECT_EQ(find_spec(all, "Mistral-7B v0.1").params, llama_params(32, 4096, 1024, 14336, 32000));
}

TEST(KvCalc, FitChecks) {
  const std::vector<KvModelSpec> all = shipped_configs();
  const KvModelSpec& l8 = find_spec(all, "Llama-3-8B");
  // fp16 weights 2 * 8,030,261,248 = 16.06e9 B; cache at 8192 = 1 GiB: fits a 24 GiB card.
  FitCheck f = check_fit(l8, 8192, KvDtype::kF16, KvDtype::kF16);
  EXPECT_EQ(f.weights_bytes, 16060522496ull);
  EXPECT_EQ(f.cache_bytes, 1073741824ull);
  EXPECT_EQ(f.total_bytes, 16060522496ull + 1073741824ull);
  EXPECT_TRUE(f.total_fits_24);
  EXPECT_FALSE(f.beyond_context);
  // At 128K (past its 8K context): 16 GiB of cache, 33.2e9 in all: only the 80 GB card.
  f = check_fit(l8, 131072, KvDtype::kF16, KvDtype::kF16);
  EXPECT_EQ(f.cache_bytes, 131072ull * 131072);
  EXPECT_TRUE(f.beyond_context);
  EXPECT_TRUE(f.cache_fits_24);
  EXPECT_FALSE(f.total_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // Llama-3-70B: fp16 weights (141e9 B) fit neither; int4 weights (35.3e9) fit 80 only.
  const KvModelSpec& l70 = find_spec(all, "Llama-3-70B");
  f = check_fit(l70, 8192, KvDtype::kF16, KvDtype::kF16);
  EXPECT_EQ(f.weights_bytes, 141107412992ull);
  EXPECT_FALSE(f.total_fits_80);
  f = check_fit(l70, 8192, KvDtype::kInt4, KvDtype::kInt4);
  EXPECT_EQ(f.weights_bytes, 35276853248ull);
  EXPECT_EQ(f.cache_bytes, 8192ull * 81920);
  EXPECT_FALSE(f.total_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // The article's model at 100K fp16: 13.5e9 weights + 52.4e9 cache = 65.9e9 <= 80 GiB.
  f = check_fit(find_spec(all, "32-layer 4096-wide MHA (Llama-2-7B)"), 100000, KvDtype::kF16, KvDtype::kF16);
  EXPECT_EQ(f.total_bytes, 2 * 6738415616ull + 52428800000ull);
  EXPECT_FALSE(f.cache_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // Card sizes are binary.
  EXPECT_EQ(kGpu24GB, 25769803776ull);
  EXPECT_EQ(kGpu80GB, 85899345920ull);
  // int4 weights of an odd count round up.
  KvModelSpec odd;
  odd.params = 3;
  EXPECT_EQ(weights_bytes(odd, KvDtype::kInt4), 2u);
}

TEST(KvCalc, CurrentModelMatchesEngine) {
  const std::shared_ptr<const Model> m = teach_model();
  const KvModelSpec s = spec_from_config(m->config, m->name, m->n_params);
  EXPECT_EQ(kv_bytes_per_token(s, KvDtype::kF32), m->config.kv_bytes_per_token());
  EXPECT_EQ(kv_bytes_per_token(s, KvDtype::kF32), 2ull * 4 * 160 * 4);
  // And what the engine really holds after a generation.
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 5;
  const auto recs = run(gen, test_prompt(), opt);
  EXPECT_EQ(recs.back()->kv_bytes, kv_cache_bytes(s, static_cast<uint64_t>(recs.back()->seq_len), KvDtype::kF32));
}

TEST(KvCalc, DtypeNames) {
  for (KvDtype d : all_kv_dtypes()) {
    KvDtype back = KvDtype::kF32;
    EXPECT_TRUE(parse_kv_dtype(to_string(d), back));
    EXPECT_EQ(back, d);
  }
  KvDtype x;
  EXPECT_FALSE(parse_kv_dtype("fp8", x));
  EXPECT_EQ(dtype_bytes(KvDtype::kInt4), 0.5);
  EXPECT_EQ(format_bytes_binary(36864), "36.0 KiB");
  EXPECT_EQ(format_bytes_binary(100), "100 B");
  EXPECT_EQ(format_bytes_decimal(16060522496.0), "16.1 GB");
}

TEST(KvCalc, LoaderErrorsNameFileAndField) {
  expect_error([] { load_kv_configs("/nonexistent/kv.json"); }, {"/nonexistent/kv.json", "cannot open"},
               "missing file");
  const std::string good =
      R"({"name": "X", "layers": 2, "query_heads": 4, "kv_heads": 2, "head_dim": 8, "hidden": 32,
          "context": 64, "params": 1000, "source": "https://example.org/config.json"})";
  EXPECT_EQ(parse_kv_configs("{\"configs\": [" + good + "]}", "t.json").size(), 1u);
  auto with = [&](const std::string& key, const std::string& value) {
    json e = json::parse(good);
    if (value.empty()) {
      e.erase(key);
    } else {
      e[key] = json::parse(value);
    }
    return "{\"configs\": [" + e.dump() + "]}";
  };
  expect_error([&] { parse_kv_configs("not json", "kv.json"); }, {"kv.json", "not valid JSON"}, "bad json");
  expect_error([&] { parse_kv_configs("{}", "kv.json"); }, {"kv.json", "configs"}, "no configs");
  expect_error([&] { parse_kv_configs(with("kv_heads", ""), "kv.json"); },
               {"kv.json", "configs[0]", "\"X\"", "kv_heads", "missing"}, "missing kv_heads");
  expect_error([&] { parse_kv_configs(with("layers", "\"32\""), "kv.json"); }, {"kv.json", "layers", "integer"},
               "string layers");
  expect_error([&] { parse_kv_configs(with("head_dim", "0"), "kv.json"); }, {"kv.json", "head_dim", "out of range"},
               "zero head_dim");
  expect_error([&] { parse_kv_configs(with("kv_heads", "3"), "kv.json"); }, {"kv.json", "kv_heads", "divide"},
               "kv_heads 3 of 4");
  expect_error([&] { parse_kv_configs(with("params", "-5"), "kv.json"); }, {"kv.json", "params"}, "negative params");
  expect_error([&] { parse_kv_configs(with("source", "\"my notes\""), "kv.json"); }, {"kv.json", "source", "https://"},
               "bad source");
  expect_error([&] { parse_kv_configs(with("sliding_window", "-1"), "kv.json"); }, {"kv.json", "sliding_window"},
               "bad window");
  expect_error([&] { parse_kv_configs("{\"configs\": [" + good + "," + good + "]}", "kv.json"); },
               {"kv.json", "configs[1]", "name", "repeats"}, "duplicate");
}

// ===========================================================================
// 2. Sampling made visible

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(static_cast<size_t>(n));
  for (float& x : l) x = nd(rng);
  return l;
}

// The stages recomputed in double, independently of the engine's helpers.
struct RefStages {
  std::vector<double> pen, p1, pt;
  std::set<int> topk, kept;
};
RefStages reference_stages(const std::vector<float>& logits, const std::vector<int>& hist, const SamplerSettings& s) {
  RefStages r;
  const size_t V = logits.size();
  r.pen.assign(logits.begin(), logits.end());
  const std::set<int> seen(hist.begin(), hist.end());
  for (int t : seen) r.pen[t] = r.pen[t] > 0 ? r.pen[t] / s.repetition_penalty : r.pen[t] * s.repetition_penalty;
  auto sm = [&](double T) {
    std::vector<double> p(V);
    const double mx = *std::max_element(r.pen.begin(), r.pen.end());
    double z = 0;
    for (size_t i = 0; i < V; ++i) z += p[i] = std::exp((r.pen[i] - mx) / T);
    for (double& x : p) x /= z;
    return p;
  };
  r.p1 = sm(1.0);
  r.pt = sm(s.greedy ? 1.0 : s.temperature);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r.pt[a] > r.pt[b]; });
  const size_t k = s.top_k > 0 ? std::min<size_t>(V, static_cast<size_t>(s.top_k)) : V;
  double mass_k = 0;
  for (size_t i = 0; i < k; ++i) {
    r.topk.insert(order[i]);
    mass_k += r.pt[order[i]];
  }
  double cum = 0;
  for (size_t i = 0; i < k; ++i) {
    r.kept.insert(order[i]);
    cum += r.pt[order[i]] / mass_k;
    if (s.top_p < 1.0f && cum >= s.top_p) break;
  }
  return r;
}

TEST(Sampling, HandExample) {
  // Logits 0..4 = {2, 1, 0.5, -1, 3}; history {0, 3}; penalty 2: token 0 -> 1, token 3 -> -2.
  const std::vector<float> l = {2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
  SamplerSettings s = sampled(1, 1.0f, 3, 0.8f, 2.0f);
  // Penalised {1, 1, 0.5, -2, 3}: order 4, 0, 1, 2, 3 (ties: lower id first).
  // top-k 3 keeps {4, 0, 1}; their mass renormalised: e^3, e, e over e^3 + 2e.
  const double z = std::exp(3.0) + 2 * std::exp(1.0);
  const double c0 = std::exp(3.0) / z;  // 0.787: below 0.8, so top-p needs token 0 too
  const double c1 = c0 + std::exp(1.0) / z;
  SamplingExplain e = explain_sampling(l, {0, 3, 0}, s, 0.5, 10);
  ASSERT_EQ(e.penalized.size(), 2u);
  EXPECT_EQ(e.penalized[0].token, 0);
  EXPECT_FLOAT_EQ(e.penalized[0].logit_before, 2.0f);
  EXPECT_FLOAT_EQ(e.penalized[0].logit_after, 1.0f);
  EXPECT_EQ(e.penalized[1].token, 3);
  EXPECT_FLOAT_EQ(e.penalized[1].logit_after, -2.0f);
  EXPECT_EQ(e.n_top_k, 3);
  EXPECT_EQ(e.kept, (std::vector<int>{4, 0}));
  ASSERT_EQ(e.cum_hi.size(), 2u);
  EXPECT_NEAR(e.cum_hi[0], c0 / c1, 1e-6);
  EXPECT_NEAR(e.cum_hi[1], 1.0, 1e-12);
  EXPECT_EQ(e.token, 4);  // 0.5 < 0.787 / 0.9 lands in the first bar
  EXPECT_EQ(e.draw_bar, 0);
  ASSERT_EQ(e.bars.size(), 5u);
  EXPECT_EQ(e.bars[0].token, 4);
  EXPECT_TRUE(e.bars[0].chosen);
  EXPECT_EQ(e.bars[1].token, 0);
  EXPECT_TRUE(e.bars[1].penalized);
  EXPECT_TRUE(e.bars[1].kept());
  EXPECT_EQ(e.bars[2].token, 1);
  EXPECT_TRUE(e.bars[2].cut_by_top_p);
  EXPECT_FALSE(e.bars[2].cut_by_top_k);
  EXPECT_EQ(e.bars[3].token, 2);
  EXPECT_TRUE(e.bars[3].cut_by_top_k);
  EXPECT_TRUE(e.bars[4].cut_by_top_k);
  EXPECT_TRUE(e.bars[4].penalized);
  // A draw past the first interval lands on token 0.
  e = explain_sampling(l, {0, 3}, s, 0.95, 10);
  EXPECT_EQ(e.token, 0);
  EXPECT_EQ(e.draw_bar, 1);
  EXPECT_NEAR(e.bars[1].p_kept, (std::exp(1.0) / z) / c1, 1e-6);
  // Temperature sharpens: p after temperature 0.5 of token 4 vs before.
  s.temperature = 0.5f;
  e = explain_sampling(l, {0, 3}, s, 0.5, 10);
  EXPECT_NEAR(e.p_base[4], std::exp(3.0) / (std::exp(3.0) + 2 * std::exp(1.0) + std::exp(0.5) + std::exp(-2.0)), 1e-6);
  EXPECT_GT(e.p_temp[4], e.p_base[4]);
}

TEST(Sampling, StagesAgainstIndependentReference) {
  const std::vector<SamplerSettings> settings = {sampled(3, 1.0f, 0, 1.0f, 1.0f), sampled(4, 0.7f, 50, 1.0f, 1.0f),
                                                 sampled(5, 1.3f, 0, 0.8f, 1.0f), sampled(6, 0.9f, 40, 0.9f, 1.3f),
                                                 sampled(7, 0.5f, 5, 0.5f, 2.0f), sampled(8, 2.0f, 200, 0.95f, 1.1f)};
  for (size_t si = 0; si < settings.size(); ++si) {
    for (uint32_t seed = 0; seed < 5; ++seed) {
      const std::vector<float> l = random_logits(500, 100 + seed);
      std::vector<int> hist;
      for (int i = 0; i < 30; ++i) hist.push_back(static_cast<int>((seed * 31 + i * 17) % 500));
      const SamplerSettings& s = settings[si];
      const RefStages ref = reference_stages(l, hist, s);
      const SamplingExplain e = explain_sampling(l, hist, s, 0.37, 20);
      const std::string where = "settings " + std::to_string(si) + " seed " + std::to_string(seed);
      for (size_t i = 0; i < l.size(); ++i) {
        ASSERT_NEAR(e.p_base[i], ref.p1[i], 1e-6) << where;
        ASSERT_NEAR(e.p_temp[i], ref.pt[i], 1e-6) << where;
      }
      EXPECT_EQ(std::set<int>(e.kept.begin(), e.kept.end()), ref.kept) << where;
      EXPECT_EQ(e.n_top_k, static_cast<int>(ref.topk.size())) << where;
      double cut_k = 0, cut_p = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        if (!ref.topk.count(static_cast<int>(i)))
          cut_k += ref.pt[i];
        else if (!ref.kept.count(static_cast<int>(i)))
          cut_p += ref.pt[i];
      }
      EXPECT_NEAR(e.mass_cut_by_top_k, cut_k, 1e-5) << where;
      EXPECT_NEAR(e.mass_cut_by_top_p, cut_p, 1e-5) << where;
      // Penalty: exactly the distinct history tokens, with the CTRL rule.
      std::set<int> touched;
      for (const PenaltyTouch& t : e.penalized) {
        touched.insert(t.token);
        EXPECT_FLOAT_EQ(t.logit_after, static_cast<float>(ref.pen[t.token])) << where;
      }
      if (s.repetition_penalty != 1.0f) {
        EXPECT_EQ(touched, std::set<int>(hist.begin(), hist.end())) << where;
      } else {
        EXPECT_TRUE(touched.empty()) << where;
      }
      // Bars best first; cumulative intervals tile [0, 1) over the kept set.
      ASSERT_EQ(e.bars.size() >= 20u, true) << where;
      for (size_t b = 1; b < 20; ++b) EXPECT_GE(e.bars[b - 1].p_temp, e.bars[b].p_temp) << where;
      double prev = 0;
      for (size_t j = 0; j < e.kept.size(); ++j) {
        EXPECT_GT(e.cum_hi[j], prev) << where;
        prev = e.cum_hi[j];
      }
      EXPECT_NEAR(prev, 1.0, 1e-9) << where;
      for (const TokenBar& b : e.bars) {
        EXPECT_EQ(b.kept(), ref.kept.count(b.token) == 1) << where;
        EXPECT_EQ(b.cut_by_top_k, !ref.topk.count(b.token)) << where;
        if (b.kept()) {
          EXPECT_NEAR(b.p_kept, ref.pt[b.token] / e.kept_mass, 1e-6) << where;
        }
        if (b.chosen) {
          EXPECT_TRUE(b.cum_lo <= 0.37 && 0.37 < b.cum_hi) << where;
        }
      }
    }
  }
}

TEST(Sampling, ReproducesSamplerExactly) {
  // For random logits, histories and settings, the n-th call of a seeded
  // Sampler and the explanation with the n-th draw name the same token.
  const std::vector<SamplerSettings> settings = {sampled(11, 1.0f, 0, 1.0f, 1.0f), sampled(12, 0.8f, 40, 0.9f, 1.3f),
                                                 sampled(13, 1.5f, 0, 0.97f, 1.0f), sampled(14, 0.3f, 3, 1.0f, 1.2f),
                                                 sampled(15, 4.0f, 0, 1.0f, 1.0f)};
  int checked = 0;
  for (const SamplerSettings& s : settings) {
    Sampler sm(s);
    for (int n = 0; n < 60; ++n) {
      const std::vector<float> l = random_logits(300, 1000 + n, 2.0f);
      const std::vector<int> hist = {n % 300, (n * 7) % 300, 5};
      const SampleResult r = sm.sample(l, hist, 10);
      const double u = sampler_draw(s.seed, n);
      ASSERT_EQ(static_cast<float>(u), r.draw) << "draw " << n;
      const SamplingExplain e = explain_sampling(l, hist, s, u, 10);
      ASSERT_EQ(e.token, r.token) << "seed " << s.seed << " draw " << n;
      ASSERT_EQ(e.prob, r.prob);
      ASSERT_EQ(e.bars.size() >= r.top.size(), true);
      for (size_t i = 0; i < r.top.size(); ++i) {
        EXPECT_EQ(e.bars[i].token, r.top[i].token);
        EXPECT_EQ(e.bars[i].p_temp, r.top[i].prob);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 300);
}

TEST(Sampling, GreedyIsArgmaxAfterPenalty) {
  SamplerSettings s;  // greedy
  s.repetition_penalty = 1.5f;
  s.temperature = 0.2f;  // ignored when greedy, as by the Sampler
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> l = random_logits(200, seed);
    const std::vector<int> hist = {static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin())};
    const SamplingExplain e = explain_sampling(l, hist, s, 0.9, 10);
    Sampler sm(s);
    const SampleResult r = sm.sample(l, hist, 10);
    EXPECT_EQ(e.token, r.token);
    EXPECT_EQ(e.prob, r.prob);
    EXPECT_EQ(e.draw, -1);
    EXPECT_EQ(e.kept.size(), 1u);
    EXPECT_EQ(e.temperature, 1.0f);
    EXPECT_EQ(e.p_temp, e.p_base);
    // The penalised argmax moved off the raw argmax when it was penalised enough, or not.
    const RefStages ref = reference_stages(l, hist, s);
    EXPECT_EQ(e.token, static_cast<int>(std::max_element(ref.pen.begin(), ref.pen.end()) - ref.pen.begin()));
  }
  expect_error([] { explain_sampling({}, {}, SamplerSettings{}, 0.1); }, {"logits", "empty"}, "empty logits");
  SamplerSettings bad = sampled(1);
  bad.top_p = 0;
  expect_error([&] { explain_sampling({1.0f, 2.0f}, {}, bad, 0.1); }, {"top_p"}, "bad top_p");
}

TEST(Sampling, ReproducesGeneratorTokens) {
  // The real engine on the default-size checkpoint: sampled and greedy, in
  // both cache modes and switching; every record's token and prob are what
  // the explanation of its stored logits names.
  const std::shared_ptr<const Model> m = teach_model();
  struct Case {
    SamplerSettings s;
    std::function<CacheMode(int)> mode_at;
  };
  const std::vector<Case> cases = {
      {sampled(2024, 0.9f, 40, 0.9f, 1.3f), [](int) { return CacheMode::kKV; }},
      {sampled(7, 1.2f, 0, 0.95f, 1.0f), [](int s) { return s % 5 < 2 ? CacheMode::kNoCache : CacheMode::kKV; }},
      {sampled(99, 2.0f, 0, 1.0f, 1.1f), [](int) { return CacheMode::kNoCache; }},
      {SamplerSettings{}, [](int) { return CacheMode::kKV; }},
  };
  int checked = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    Generator gen(m);
    GenerateOptions opt;
    opt.max_new = 24;
    opt.sampler = cases[ci].s;
    const std::vector<RecordPtr> recs = run(gen, test_prompt(), opt, cases[ci].mode_at);
    ASSERT_EQ(recs.size(), 24u);
    History h;
    for (const RecordPtr& r : recs) h.push(r);
    for (size_t i = 0; i < recs.size(); ++i) {
      const StepRecord& r = *recs[i];
      const std::vector<int> before = h.tokens_before(i);
      ASSERT_EQ(before.size(), static_cast<size_t>(r.seq_len));
      const SamplingExplain e = explain_record(r, before, 10);
      EXPECT_EQ(e.token, r.token) << "case " << ci << " step " << i;
      EXPECT_EQ(e.prob, r.prob) << "case " << ci << " step " << i;
      EXPECT_FALSE(e.draw_settled_by_record);
      if (!cases[ci].s.greedy) {
        // The draw the engine used is the i-th of its seed (one per sampled step).
        EXPECT_EQ(static_cast<float>(sampler_draw(cases[ci].s.seed, static_cast<int>(i))), r.draw);
        // With the exact double draw the same token, without the record's help.
        EXPECT_EQ(
            explain_sampling(r.logits, before, r.sampler, sampler_draw(r.sampler.seed, static_cast<int>(i))).token,
            r.token);
      }
      for (size_t t = 0; t < r.top.size(); ++t) {
        EXPECT_EQ(e.bars[t].token, r.top[t].token);
        EXPECT_EQ(e.bars[t].p_temp, r.top[t].prob);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 96);
}

TEST(Sampling, FloatDrawOnABoundaryIsSettledByTheRecord) {
  // Two equal logits: the boundary is exactly 0.5. The Sampler drew
  // u = 0.5 - 2^-30 (token 0); the record keeps float(u) = 0.5, which on its
  // own would land on token 1. The record's token settles it.
  StepRecord r;
  r.index = 4;
  r.logits = {1.0f, 1.0f};
  r.sampler = sampled(1, 1.0f, 0, 1.0f, 1.0f);
  const double u = 0.5 - 1.0 / 1073741824.0;
  r.draw = static_cast<float>(u);
  ASSERT_EQ(r.draw, 0.5f);
  ASSERT_EQ(explain_sampling(r.logits, {}, r.sampler, u).token, 0);
  ASSERT_EQ(explain_sampling(r.logits, {}, r.sampler, 0.5).token, 1);
  r.token = 0;
  const SamplingExplain e = explain_record(r, {});
  EXPECT_TRUE(e.draw_settled_by_record);
  EXPECT_EQ(e.token, 0);
  EXPECT_EQ(e.draw_bar, 0);
  EXPECT_EQ(e.draw, 0.5);
  EXPECT_TRUE(e.bars[0].chosen);
  EXPECT_FALSE(e.bars[1].chosen);
  // Far from a boundary the record cannot override the draw.
  r.draw = 0.9f;
  EXPECT_EQ(explain_record(r, {}).token, 1);
}

TEST(Sampling, WhatIfUsesStoredLogitsOnly) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 6;
  opt.sampler = sampled(5, 1.0f, 0, 1.0f, 1.0f);
  const auto recs = run(gen, test_prompt(), opt);
  History h;
  for (const auto& r : recs) h.push(r);
  const StepRecord& r = *recs[3];
  const std::vector<int> before = h.tokens_before(3);
  const uint64_t flops_before = gen.flops_total();
  // Greedy what-if = the argmax of the stored logits.
  SamplerSettings g;
  SamplingExplain e = explain_with_settings(r, before, g);
  EXPECT_EQ(e.token, static_cast<int>(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin()));
  // top-k 1 leaves only the argmax, whatever the draw.
  SamplerSettings k1 = r.sampler;
  k1.top_k = 1;
  e = explain_with_settings(r, before, k1);
  EXPECT_EQ(e.kept.size(), 1u);
  EXPECT_EQ(e.token, static_cast<int>(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin()));
  // Lower temperature: same logits, sharper bars, same record draw.
  SamplerSettings cold = r.sampler;
  cold.temperature = 0.3f;
  e = explain_with_settings(r, before, cold);
  EXPECT_EQ(e.draw, static_cast<double>(r.draw));
  EXPECT_GT(e.bars[0].p_temp, r.top[0].prob);
  EXPECT_EQ(explain_with_settings(r, before, cold).token, explain_sampling(r.logits, before, cold, r.draw).token);
  EXPECT_EQ(gen.flops_total(), flops_before);  // nothing ran
  // A greedy record (no draw) under sampled settings uses the given draw.
  Generator gg(m);
  GenerateOptions go;
  go.max_new = 2;
  const auto grecs = run(gg, test_prompt(), go);
  e = explain_with_settings(*grecs[0], test_prompt(), sampled(1), 10, 0.0);
  EXPECT_EQ(e.draw, 0.0);
  EXPECT_EQ(e.draw_bar, 0);
  EXPECT_EQ(e.token, e.kept[0]);
  // Dropped logits: a clear error.
  RecordPtr light = strip_detail(r, kDetailLogits);
  expect_error([&] { explain_record(*light, before); }, {"step 3", "logits"}, "stripped record");
}

// ===========================================================================
// 3. Prefill vs decode

RecordPtr fake(int index, bool prefill, bool refill, CacheMode mode, int n_new, uint64_t flops, double ms,
               uint64_t read_bytes = 0) {
  auto r = std::make_shared<StepRecord>();
  r->index = index;
  r->prefill = prefill;
  r->refill = refill;
  r->mode = mode;
  r->n_new = n_new;
  r->n_prompt = 10;
  r->flops = flops;
  r->ms = ms;
  r->read_bytes = read_bytes;
  return r;
}

// Bytes each forward had to read, from the architecture by hand: per layer
// 12 d^2 matrix values (kept at 2 bytes from an F16 file, else 4) and 13 d f32
// vector values, the LM head (V x d, matrix width), ln_f, one wte and one wpe
// row; plus, on the cache, 2 x L x T x d f32 K/V values.
void expect_read_bytes(const Model& m, const std::vector<RecordPtr>& recs) {
  const Config& c = m.config;
  const uint64_t mw = m.stored_dtype == "F16" ? 2 : 4;
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  const uint64_t weights =
      L * (12 * d * d * mw + 13 * d * 4) + static_cast<uint64_t>(c.vocab_size) * d * mw + 4 * d * 4;
  for (const RecordPtr& r : recs) {
    const uint64_t T = static_cast<uint64_t>(r->seq_len);
    EXPECT_EQ(r->read_bytes, weights + (r->mode == CacheMode::kKV ? 2 * L * T * d * 4 : 0))
        << m.name << " step " << r->index;
  }
}

TEST(Phases, SyntheticRecordsByHand) {
  const std::vector<RecordPtr> recs = {
      fake(0, true, false, CacheMode::kKV, 10, 4000000000ull, 20.0),              // 10 positions, 4 GFLOP in 20 ms
      fake(1, false, false, CacheMode::kKV, 1, 100000000ull, 5.0, 200000000ull),  // 200 MB read
      fake(2, false, false, CacheMode::kKV, 1, 100000000ull, 7.0, 220000000ull),
      fake(3, false, false, CacheMode::kNoCache, 13, 5000000000ull, 25.0),
      fake(4, false, true, CacheMode::kKV, 14, 5500000000ull, 26.0),
      fake(5, false, false, CacheMode::kKV, 1, 100000000ull, 6.0),
  };
  const PhaseReport p = measure_phases(recs);
  EXPECT_TRUE(p.has_prefill);
  EXPECT_DOUBLE_EQ(p.ttft_ms, 20.0);
  EXPECT_EQ(p.prompt_tokens, 10);
  EXPECT_DOUBLE_EQ(p.prefill.positions_per_s(), 500.0);  // 10 / 0.020 s
  EXPECT_DOUBLE_EQ(p.prefill.gflops_per_s(), 200.0);     // 4e9 / 0.020 s
  EXPECT_EQ(p.decode.records, 3);
  EXPECT_DOUBLE_EQ(p.decode.ms, 18.0);
  EXPECT_DOUBLE_EQ(p.decode.mean_ms(), 6.0);
  EXPECT_DOUBLE_EQ(p.decode.tokens_per_s(), 3 / 0.018);
  EXPECT_DOUBLE_EQ(p.decode.gflops_per_s(), 3e8 / 0.018 / 1e9);
  EXPECT_EQ(p.decode.read_bytes, 420000000ull);
  EXPECT_DOUBLE_EQ(p.decode.gb_per_s(), 4.2e8 / 0.018 / 1e9);
  EXPECT_DOUBLE_EQ(p.decode.mean_read_bytes(), 1.4e8);
  EXPECT_EQ(p.refill.records, 1);
  EXPECT_EQ(p.refill.positions, 14);
  EXPECT_EQ(p.no_cache.records, 1);
  EXPECT_DOUBLE_EQ(p.no_cache.gflops_per_s(), 200.0);
  EXPECT_EQ(p.all.records, 6);
  EXPECT_EQ(p.all.flops, 4000000000ull + 3 * 100000000ull + 5000000000ull + 5500000000ull);
  // Up to step 2 (the timeline's position): prefill and two decodes.
  const PhaseReport q = measure_phases(recs, 3);
  EXPECT_EQ(q.decode.records, 2);
  EXPECT_EQ(q.refill.records, 0);
  // Nothing yet / zero time: no division by zero.
  EXPECT_FALSE(measure_phases({}).has_prefill);
  EXPECT_EQ(PhaseStats{}.gflops_per_s(), 0.0);
  EXPECT_EQ(PhaseStats{}.gb_per_s(), 0.0);

  // In words: prefill at 200 GFLOP/s vs decode at 16.7 is the usual contrast;
  // a prefill no faster than decode is called out as a too-short prompt.
  const std::string words = phases_summary(p);
  EXPECT_NE(words.find("12.0x the FLOP rate in prefill"), std::string::npos) << words;
  EXPECT_NE(words.find("re-read 140.0 MB"), std::string::npos) << words;
  EXPECT_NE(words.find("23.3 GB/s"), std::string::npos) << words;
  const std::vector<RecordPtr> slow_prefill = {fake(0, true, false, CacheMode::kKV, 4, 100000000ull, 20.0),
                                               fake(1, false, false, CacheMode::kKV, 1, 100000000ull, 5.0, 1000000ull)};
  const std::string short_words = phases_summary(measure_phases(slow_prefill));
  EXPECT_NE(short_words.find("4-token prompt is too short"), std::string::npos) << short_words;
  EXPECT_EQ(short_words.find("the FLOP rate in prefill"), std::string::npos) << short_words;
  EXPECT_TRUE(phases_summary(measure_phases(recs, 1)).empty());
}

TEST(Phases, RealGeneration) {
  const std::shared_ptr<const Model> m = teach_model();
  const Config& c = m->config;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 12;
  const auto recs =
      run(gen, test_prompt(), opt, [](int s) { return s >= 5 && s < 7 ? CacheMode::kNoCache : CacheMode::kKV; });
  const PhaseReport p = measure_phases(recs);
  const int P = 16;
  EXPECT_EQ(p.prefill.flops, forward_flops(c, P, P));
  EXPECT_DOUBLE_EQ(p.ttft_ms, recs[0]->ms);
  // Steps 1-4, 8-11 decode on the cache; 5, 6 NO CACHE; 7 refills.
  EXPECT_EQ(p.decode.records, 8);
  EXPECT_EQ(p.no_cache.records, 2);
  EXPECT_EQ(p.refill.records, 1);
  uint64_t dec = 0;
  for (int s : {1, 2, 3, 4, 8, 9, 10, 11}) dec += forward_flops(c, 1, P + s);
  EXPECT_EQ(p.decode.flops, dec);
  EXPECT_EQ(p.refill.flops, forward_flops(c, P + 7, P + 7));
  EXPECT_EQ(p.all.flops, gen.flops_total());
  EXPECT_NEAR(p.all.ms, gen.ms_total(), 1e-9);
  EXPECT_GT(p.prefill.gflops_per_s(), 0.0);
  EXPECT_GT(p.decode.tokens_per_s(), 0.0);

  expect_read_bytes(*m, recs);
  EXPECT_GT(p.decode.gb_per_s(), 0.0);
}

TEST(Phases, ReadBytesOfTheF16DefaultModel) {
  const std::shared_ptr<const Model> m = load_model(KVSCOPE_SOURCE_DIR "/assets/models/kvscope-tiny");
  ASSERT_EQ(m->stored_dtype, "F16");
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 4;
  const auto recs = run(gen, test_prompt(8), opt, [](int s) { return s == 2 ? CacheMode::kNoCache : CacheMode::kKV; });
  expect_read_bytes(*m, recs);
}

// ===========================================================================
// 4. Timeline

TEST(History, DefaultModelFullContextUnderBudget) {
  // The default model's size at full context, every detail kept: well under 256 MB.
  const std::shared_ptr<const Model> m = teach_model();
  const Config& c = m->config;
  ASSERT_EQ(c.n_layer, 4);
  ASSERT_EQ(c.n_positions, 256);
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 1000;
  opt.sampler = sampled(3);
  History h;
  const auto recs = run(gen, test_prompt(), opt);
  EXPECT_EQ(gen.reason(), StopReason::kContextFull);
  for (const auto& r : recs) h.push(r);
  // The last forward covers the whole context (the engine stops once no
  // further forward fits; 255 or 256 positions depending on where it draws that line).
  const int last = h.back()->seq_len;
  ASSERT_GE(last, 255);
  ASSERT_LE(last, 256);
  ASSERT_EQ(h.size(), static_cast<size_t>(last - 16 + 1));
  EXPECT_FALSE(h.trimmed().any());
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h.detail(i), static_cast<unsigned>(kDetailAll)) << i;
  // The estimate covers the vectors (independent count of their elements) and little else.
  uint64_t floats = 0;
  for (const auto& r : recs) floats += r->attn.size() + r->logits.size() + r->k.size() + r->v.size();
  EXPECT_GE(h.bytes(), floats * 4);
  EXPECT_LE(h.bytes(), floats * 4 + recs.size() * 2048);
  // By the shapes: attention 4*4*L per step, logits V, K/V 2*4*160 per new position.
  uint64_t expect = 4ull * 4 * 16 * 16 + 3257 + 2ull * 4 * 160 * 16;  // the prefill keeps every prompt row
  for (int L = 17; L <= last; ++L) expect += 4ull * 4 * L + 3257 + 2ull * 4 * 160;
  EXPECT_EQ(floats, expect);
  EXPECT_LT(h.bytes(), kDefaultHistoryBudget);
  EXPECT_LT(h.bytes(), 16ull << 20);  // about 8 MB in fact
}

TEST(History, BudgetDropsOldDetailKeepsTokensAndCounters) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 60;
  opt.sampler = sampled(8);
  const auto recs = run(gen, test_prompt(), opt);
  History full(0);
  for (const auto& r : recs) full.push(r);
  const uint64_t all_bytes = full.bytes();

  // A budget of a half: attention and logits of the oldest go first.
  History h(all_bytes / 2, 8);
  for (const auto& r : recs) h.push(r);
  EXPECT_LE(h.bytes(), h.budget());
  EXPECT_TRUE(h.trimmed().any());
  EXPECT_GT(h.trimmed().attention_dropped, 0);
  EXPECT_EQ(h.trimmed().kv_dropped, 0);  // pass 1 was enough
  EXPECT_EQ(h.bytes() + h.trimmed().bytes_freed, all_bytes);
  ASSERT_EQ(h.size(), recs.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const StepRecord& a = *h[i];
    const StepRecord& b = *recs[i];
    // Tokens, candidates and counters stay for every step.
    EXPECT_EQ(a.token, b.token);
    EXPECT_EQ(a.prob, b.prob);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.seq_len, b.seq_len);
    EXPECT_EQ(a.flops, b.flops);
    EXPECT_EQ(a.flops_total, b.flops_total);
    EXPECT_EQ(a.kv_bytes, b.kv_bytes);
    EXPECT_EQ(a.ms, b.ms);
    EXPECT_EQ(a.top.size(), b.top.size());
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
    EXPECT_EQ(a.n_kv, b.n_kv);
    if (static_cast<int>(i) < h.trimmed().first_full) {
      EXPECT_TRUE(a.attn.empty());
      EXPECT_EQ(a.n_rows, 0);
      EXPECT_TRUE(a.logits.empty());
      EXPECT_EQ(a.k, b.k);
    } else {
      EXPECT_EQ(h[i].get(), recs[i].get());  // untouched: the very same record
    }
  }
  EXPECT_GE(h.trimmed().first_full, 1);
  EXPECT_LE(h.trimmed().first_full, static_cast<int>(h.size()) - 8);  // the newest 8 kept whole
  EXPECT_EQ(h.tokens_before(h.size()), full.tokens_before(full.size()));

  // A tiny budget: K/V rows go too, the newest 8 still whole.
  History tiny(1, 8);
  for (const auto& r : recs) tiny.push(r);
  EXPECT_GT(tiny.trimmed().kv_dropped, 0);
  for (size_t i = 0; i + 8 < tiny.size(); ++i) EXPECT_EQ(tiny.detail(i), 0u) << i;
  for (size_t i = tiny.size() - 8; i < tiny.size(); ++i) EXPECT_EQ(tiny[i].get(), recs[i].get());

  // Raising the budget later does not restore detail (it was dropped), lowering it enforces at once.
  History later(0, 4);
  for (const auto& r : recs) later.push(r);
  EXPECT_FALSE(later.trimmed().any());
  later.set_budget(all_bytes / 2);
  EXPECT_LE(later.bytes(), all_bytes / 2);
  EXPECT_TRUE(later.trimmed().any());
}

TEST(History, ScrubbingAndTokensBefore) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 10;
  const auto recs = run(gen, test_prompt(), opt);
  History h;
  expect_error([&] { h.push(recs[1]); }, {"prefill"}, "first not prefill");
  for (const auto& r : recs) h.push(r);
  for (size_t i = 0; i < h.size(); ++i) {
    const auto upto = h.upto(i);
    ASSERT_EQ(upto.size(), i + 1);
    EXPECT_EQ(upto.back().get(), recs[i].get());
    const std::vector<int> before = h.tokens_before(i);
    EXPECT_EQ(static_cast<int>(before.size()), recs[i]->seq_len);
    EXPECT_TRUE(std::equal(before.begin(), before.end(), gen.tokens().begin()));
  }
  EXPECT_EQ(h.tokens_before(h.size()), gen.tokens());
  EXPECT_EQ(h.upto(1000).size(), h.size());
  h.truncate(4);
  EXPECT_EQ(h.size(), 4u);
  uint64_t b = 0;
  for (size_t i = 0; i < 4; ++i) b += record_bytes(*recs[i]);
  EXPECT_EQ(h.bytes(), b);
}

// ===========================================================================
// 5. Branching

TEST(Branch, ForkCostFormula) {
  const Config c = testutil::gpt2_124m_config();
  for (int P : {1, 2, 7, 100, 1023}) {
    const uint64_t d = 768, p = static_cast<uint64_t>(P), L = 12, V = 50257;
    const ForkCost kv = fork_cost(c, P, true);
    // Written out: one new position attending to P + 1 keys, vs all P + 1 positions.
    EXPECT_EQ(kv.flops_reuse, L * (24 * d * d + 4 * d * (p + 1)) + 2 * d * V) << P;
    EXPECT_EQ(kv.flops_recompute, L * (24 * (p + 1) * d * d + 4 * d * ((p + 1) * (p + 2) / 2)) + 2 * d * V) << P;
    EXPECT_EQ(kv.flops_saved, L * (24 * p * d * d + 2 * d * p * (p + 1))) << P;
    EXPECT_EQ(kv.flops_saved, forward_flops(c, P, P) - 2 * d * V) << P;
    EXPECT_EQ(kv.flops_next, kv.flops_reuse);
    EXPECT_EQ(kv.reused_positions, P);
    const ForkCost nc = fork_cost(c, P, false);
    EXPECT_EQ(nc.flops_saved, 0u);
    EXPECT_EQ(nc.flops_next, nc.flops_recompute);
    EXPECT_EQ(nc.reused_positions, 0);
  }
  expect_error([&] { fork_cost(c, 0, true); }, {"fork"}, "P = 0");
  EXPECT_TRUE(cache_reusable(CacheMode::kKV, 5, {1, 2, 3, 4, 5}, {1, 2, 3}));
  EXPECT_FALSE(cache_reusable(CacheMode::kNoCache, 5, {1, 2, 3, 4, 5}, {1, 2, 3}));
  EXPECT_FALSE(cache_reusable(CacheMode::kKV, 2, {1, 2, 3, 4, 5}, {1, 2, 3}));  // cache too short
  EXPECT_FALSE(cache_reusable(CacheMode::kKV, 5, {1, 2, 9, 4, 5}, {1, 2, 3}));  // another lineage
}

TEST(Branch, ForkReusesCacheExactly) {
  // The fork, done with the engine's primitives: a KV generation runs 12
  // steps; we fork at step 5 with its second-best candidate. Cutting the
  // cache back to the fork point and computing one position gives the same
  // logits as recomputing every position, for exactly the FLOPs fork_cost says.
  const std::shared_ptr<const Model> m = teach_model();
  const Config& c = m->config;
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 12;
  const auto recs = run(gen, test_prompt(), opt);
  History h;
  for (const auto& r : recs) h.push(r);
  const int step = 5;
  const StepRecord& at = *recs[step];
  const int forced = at.top[1].token;
  ASSERT_NE(forced, at.token);
  std::vector<int> prefix = h.tokens_before(step);
  const int P = static_cast<int>(prefix.size());
  ASSERT_EQ(P, at.seq_len);
  ASSERT_TRUE(cache_reusable(CacheMode::kKV, gen.cache().n_pos, gen.tokens(), prefix));
  const ForkCost cost = fork_cost(c, P, true);
  std::vector<int> branch = prefix;
  branch.push_back(forced);

  // The parent's cache as the generator left it (every position but the last token's).
  Engine eng(*m);
  KVCache cache;
  cache.init(c);
  const std::vector<int> parent(gen.tokens().begin(), gen.tokens().end() - 1);
  eng.forward(parent, 0, &cache, false);
  ASSERT_EQ(cache.n_pos, gen.cache().n_pos);
  cache.truncate(P);
  const ForwardOutput reuse = eng.forward(branch, P, &cache, false);
  EXPECT_EQ(reuse.n_new, 1);
  EXPECT_EQ(reuse.flops, cost.flops_reuse);
  EXPECT_EQ(cache.n_pos, P + 1);

  Engine eng2(*m);
  const ForwardOutput recompute = eng2.forward(branch, 0, nullptr, false);
  EXPECT_EQ(recompute.flops, cost.flops_recompute);
  EXPECT_EQ(recompute.flops - reuse.flops, cost.flops_saved);
  ASSERT_EQ(reuse.logits.size(), recompute.logits.size());
  float max_diff = 0;
  for (size_t i = 0; i < reuse.logits.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(reuse.logits[i] - recompute.logits[i]));
  EXPECT_LT(max_diff, 1e-3f);
  // Attention of the new position over the reused keys, the same either way.
  ASSERT_EQ(reuse.attn.size(), recompute.attn.size());
  for (size_t i = 0; i < reuse.attn.size(); ++i) ASSERT_NEAR(reuse.attn[i], recompute.attn[i], 1e-4f);

  // A fresh generation forced to the same prefix (recomputing it) continues the same way.
  Generator fresh(m);
  GenerateOptions fo;
  fo.max_new = 1;
  fresh.start_tokens(branch, fo);
  const RecordPtr first = fresh.step();
  EXPECT_EQ(first->flops, forward_flops(c, P + 1, P + 1));
  EXPECT_EQ(first->token,
            static_cast<int>(std::max_element(reuse.logits.begin(), reuse.logits.end()) - reuse.logits.begin()));
}

// Generator::fork(prefix, at, token): the real fork, cutting the cache back and reusing it.

template <class G>
void check_generator_fork(const std::shared_ptr<const Model>& m) {
  const Config& c = m->config;
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    const std::string where = to_string(mode);
    G g(m);
    GenerateOptions o;
    o.max_new = 20;
    o.mode = mode;
    g.start_tokens(test_prompt(), o);
    BranchTree tree;
    const int root = tree.start();
    for (int i = 0; i < 12; ++i) tree.push(g.step());
    const std::vector<RecordPtr> recs = tree.branch(root).history.records();
    const StepRecord& at = *recs[5];
    const std::vector<int> prefix = tree.current_history().tokens_before(5);
    const int P = at.seq_len;
    const bool reuse = cache_reusable(mode, g.cache().n_pos, g.tokens(), prefix);
    EXPECT_EQ(reuse, mode == CacheMode::kKV) << where;
    const ForkCost cost = fork_cost(c, P, reuse);
    RecordPtr forced = g.fork(prefix, at, at.top[1].token);
    EXPECT_EQ(forced->token, at.top[1].token) << where;
    EXPECT_EQ(forced->prob, make_forced_record(at, at.top[1].token, prefix, m->tokenizer)->prob) << where;
    const int b = tree.fork(forced, cost);
    RecordPtr next = g.step();
    tree.push(next);
    EXPECT_EQ(next->index, 6) << where;
    EXPECT_EQ(next->seq_len, P + 1) << where;
    EXPECT_EQ(next->flops, cost.flops_next) << where;  // the saving, exactly as accounted
    EXPECT_EQ(next->flops_total, at.flops_total + next->flops) << where;
    EXPECT_FALSE(next->refill) << where;
    EXPECT_EQ(next->n_kv, 1) << where;
    EXPECT_EQ(branch_tokens(tree.branch(b)), g.tokens()) << where;
    // Back to the first branch's end: another lineage, so the next KV step refills.
    const std::vector<int> other = tree.branch(root).history.tokens_before(11);
    g.fork(other, *recs[11], recs[11]->token);
    EXPECT_EQ(g.cache().n_pos, 0) << where;
    EXPECT_EQ(g.step()->flops, forward_flops(c, recs[11]->seq_len + 1, recs[11]->seq_len + 1)) << where;
  }
}

TEST(Branch, GeneratorFork) {
  check_generator_fork<Generator>(teach_model());
}

TEST(Branch, ForcedRecordAndTree) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 10;
  opt.sampler = sampled(77, 1.0f, 0, 1.0f, 1.2f);
  const auto recs = run(gen, test_prompt(), opt);
  BranchTree tree;
  const int root = tree.start();
  for (const auto& r : recs) tree.push(r);
  double lp = 0;
  std::string text;
  for (const auto& r : recs) {
    lp += std::log(static_cast<double>(r->prob));
    text += r->raw_piece;
  }
  EXPECT_NEAR(tree.branch(root).log_prob, lp, 1e-9);
  EXPECT_EQ(tree.branch(root).text, text);
  EXPECT_EQ(branch_tokens(tree.branch(root)), gen.tokens());

  const int step = 3;
  const std::vector<int> before = tree.current_history().tokens_before(step);
  const SamplingExplain e = explain_record(*recs[step], before);
  const int forced_token = e.bars[2].token;  // the third-best candidate
  ASSERT_NE(forced_token, recs[step]->token);
  RecordPtr forced = make_forced_record(*recs[step], forced_token, before, m->tokenizer);
  EXPECT_EQ(forced->token, forced_token);
  EXPECT_EQ(forced->prob, e.p_temp[static_cast<size_t>(forced_token)]);
  EXPECT_EQ(forced->raw_piece, m->tokenizer.token_bytes(forced_token));
  EXPECT_EQ(forced->flops, recs[step]->flops);  // the forward that ran is the parent's
  EXPECT_EQ(forced->logits, recs[step]->logits);
  // From the candidates when the logits were dropped.
  RecordPtr light = strip_detail(*recs[step], kDetailAll);
  EXPECT_EQ(make_forced_record(*light, forced_token, before, m->tokenizer)->prob, e.p_temp[forced_token]);

  const ForkCost cost = fork_cost(m->config, recs[step]->seq_len, true);
  const int b1 = tree.fork(forced, cost);
  EXPECT_EQ(tree.current(), b1);
  const Branch& br = tree.branch(b1);
  EXPECT_EQ(br.parent, root);
  EXPECT_EQ(br.fork_step, step);
  ASSERT_EQ(br.history.size(), static_cast<size_t>(step + 1));
  for (int i = 0; i < step; ++i)
    EXPECT_EQ(br.history[static_cast<size_t>(i)].get(), recs[static_cast<size_t>(i)].get());
  double blp = 0;
  for (int i = 0; i < step; ++i) blp += std::log(static_cast<double>(recs[static_cast<size_t>(i)]->prob));
  blp += std::log(static_cast<double>(forced->prob));
  EXPECT_NEAR(br.log_prob, blp, 1e-9);
  EXPECT_NEAR(br.prob(), std::exp(blp), 1e-12);
  EXPECT_EQ(tree.shared_positions(root, b1), recs[step]->seq_len);  // the prompt and the first 3 chosen
  EXPECT_EQ(tree.flops_saved_total(), cost.flops_saved);
  // Shared records are counted once.
  uint64_t unique = 0;
  for (const auto& r : recs) unique += record_bytes(*r);
  unique += record_bytes(*forced);
  EXPECT_EQ(tree.bytes(), unique);

  // Clicking the same candidate again finds the branch; a second fork of the root nests correctly.
  EXPECT_EQ(tree.find_fork(root, step, forced_token), b1);
  EXPECT_EQ(tree.find_fork(root, step, recs[step]->token), -1);
  tree.select(root);
  const std::vector<int> before7 = tree.current_history().tokens_before(7);
  const int b2 = tree.fork(make_forced_record(*recs[7], recs[7]->top[1].token, before7, m->tokenizer),
                           fork_cost(m->config, recs[7]->seq_len, false));
  tree.select(b1);
  const int b3 = tree.fork(make_forced_record(*tree.current_history()[1], recs[1]->top[1].token,
                                              tree.current_history().tokens_before(1), m->tokenizer),
                           fork_cost(m->config, recs[1]->seq_len, true));
  const std::vector<TreeRow> rows = tree.rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].id, root);
  EXPECT_EQ(rows[0].depth, 0);
  EXPECT_EQ(rows[1].id, b1);
  EXPECT_EQ(rows[1].depth, 1);
  EXPECT_EQ(rows[2].id, b3);
  EXPECT_EQ(rows[2].depth, 2);
  EXPECT_EQ(rows[3].id, b2);
  EXPECT_EQ(rows[3].depth, 1);
  EXPECT_EQ(tree.children(root), (std::vector<int>{b1, b2}));
  EXPECT_EQ(tree.branch(b2).fork.flops_saved, 0u);  // NO CACHE fork: recomputed
  expect_error([&] { tree.select(42); }, {"branch 42"}, "no such branch");
  // A record that does not follow the branch is refused.
  tree.select(root);
  expect_error([&] { tree.push(recs[2]); }, {"does not follow"}, "out of order");
}

TEST(Branch, TreeBudgetSharesStrippedRecords) {
  const std::shared_ptr<const Model> m = teach_model();
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 40;
  const auto recs = run(gen, test_prompt(), opt);
  BranchTree tree(0, 4);
  const int root = tree.start();
  for (const auto& r : recs) tree.push(r);
  const int b = tree.fork(
      make_forced_record(*recs[30], recs[30]->top[1].token, tree.current_history().tokens_before(30), m->tokenizer),
      fork_cost(m->config, recs[30]->seq_len, true));
  const uint64_t all = tree.bytes();
  tree.set_budget(all / 3);
  EXPECT_LE(tree.bytes(), all / 3);
  EXPECT_TRUE(tree.trimmed().any());
  // Shared prefix records: one stripped copy held by both branches.
  for (size_t i = 0; i < 30; ++i) EXPECT_EQ(tree.branch(root).history[i].get(), tree.branch(b).history[i].get()) << i;
  EXPECT_EQ(tree.branch(root).history[0]->attn.size(), 0u);
  // The current branch's newest 4 records keep their detail.
  const History& cur = tree.current_history();
  for (size_t i = cur.size() - 4; i < cur.size(); ++i) EXPECT_EQ(cur.detail(i) & kDetailLogits, kDetailLogits) << i;
  // Tokens of both branches intact.
  EXPECT_EQ(branch_tokens(tree.branch(root)), gen.tokens());
  EXPECT_EQ(tree.branch(b).history.back()->token, recs[30]->top[1].token);
}

// ===========================================================================
// 6. Saved views

TEST(SavedViewFile, RoundTrip) {
  testutil::TempDir tmp("teach-view");
  SavedView v;
  v.camera.target[0] = 12.5f;
  v.camera.target[1] = -1.25f;
  v.camera.target[2] = 0.5f;
  v.camera.distance = 33.0f;
  v.camera.yaw = -0.75f;
  v.camera.pitch = 0.5f;
  v.camera.fov_y = 0.9f;
  v.camera.preset = "top";
  v.step = 17;
  v.prompt = "The capital of France is \"Paris\"\n\xc3\xa9";
  v.model = "/models/gpt2";
  v.max_new = 80;
  v.cache = CacheMode::kNoCache;
  v.sampler = sampled(18446744073709551557ull, 0.7f, 40, 0.9f, 1.3f);
  v.layer = 2;
  v.head = -1;
  v.min_weight = 0.05f;
  v.text_scale = 1.5f;
  v.presentation = true;
  v.predict = true;
  const std::string path = tmp / "lesson.json";
  save_view(v, path);
  const SavedView w = load_view(path);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(w.camera.target[i], v.camera.target[i]);
  EXPECT_EQ(w.camera.distance, v.camera.distance);
  EXPECT_EQ(w.camera.yaw, v.camera.yaw);
  EXPECT_EQ(w.camera.pitch, v.camera.pitch);
  EXPECT_EQ(w.camera.fov_y, v.camera.fov_y);
  EXPECT_EQ(w.camera.preset, "top");
  EXPECT_EQ(w.step, 17);
  EXPECT_EQ(w.prompt, v.prompt);
  EXPECT_EQ(w.model, v.model);
  EXPECT_EQ(w.max_new, 80);
  EXPECT_EQ(w.cache, CacheMode::kNoCache);
  EXPECT_EQ(w.sampler.greedy, false);
  EXPECT_EQ(w.sampler.temperature, 0.7f);
  EXPECT_EQ(w.sampler.top_k, 40);
  EXPECT_EQ(w.sampler.top_p, 0.9f);
  EXPECT_EQ(w.sampler.repetition_penalty, 1.3f);
  EXPECT_EQ(w.sampler.seed, 18446744073709551557ull);
  EXPECT_EQ(w.layer, 2);
  EXPECT_EQ(w.head, -1);
  EXPECT_EQ(w.min_weight, 0.05f);
  EXPECT_EQ(w.text_scale, 1.5f);
  EXPECT_TRUE(w.presentation);
  EXPECT_TRUE(w.predict);
  // Plain floats on disk, readable by anyone.
  const json j = testutil::read_json(path);
  EXPECT_EQ(j.at("camera").at("target").size(), 3u);
  EXPECT_EQ(j.at("step"), 17);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A minimal file takes defaults.
  const SavedView d = view_from_json(R"({"kvscope_view": 1})", "min.json");
  EXPECT_EQ(d.step, 0);
  EXPECT_EQ(d.cache, CacheMode::kKV);
  EXPECT_TRUE(d.sampler.greedy);
}

TEST(SavedViewFile, ErrorsNameFileAndField) {
  testutil::TempDir tmp("teach-view-bad");
  expect_error([&] { load_view(tmp / "missing.json"); }, {"missing.json", "cannot open"}, "missing");
  expect_error([&] { save_view(SavedView{}, tmp / "no/such/dir/v.json"); }, {"no/such/dir/v.json", "cannot write"},
               "bad dir");
  struct Bad {
    const char* json;
    std::vector<std::string> needles;
  };
  const std::vector<Bad> bad = {
      {"{", {"v.json", "not valid JSON"}},
      {"[]", {"v.json", "object"}},
      {R"({"step": 3})", {"v.json", "kvscope_view"}},
      {R"({"kvscope_view": 2})", {"v.json", "kvscope_view", "not supported"}},
      {R"({"kvscope_view": 1, "camera": {"yaw": "left"}})", {"v.json", "camera.yaw", "number"}},
      {R"({"kvscope_view": 1, "camera": {"target": [1, 2]}})", {"v.json", "camera.target", "3 numbers"}},
      {R"({"kvscope_view": 1, "camera": {"distance": -1}})", {"v.json", "camera.distance", "out of range"}},
      {R"({"kvscope_view": 1, "camera": {"preset": "iso"}})", {"v.json", "camera.preset", "iso"}},
      {R"({"kvscope_view": 1, "camera": 5})", {"v.json", "camera", "object"}},
      {R"({"kvscope_view": 1, "step": -2})", {"v.json", "step", "out of range"}},
      {R"({"kvscope_view": 1, "step": 1.5})", {"v.json", "step", "integer"}},
      {R"({"kvscope_view": 1, "cache": "maybe"})", {"v.json", "cache", "kv_cache"}},
      {R"({"kvscope_view": 1, "sampler": {"top_p": 0}})", {"v.json", "sampler.top_p", "out of range"}},
      {R"({"kvscope_view": 1, "sampler": {"temperature": 0}})", {"v.json", "sampler.temperature"}},
      {R"({"kvscope_view": 1, "sampler": {"seed": -1}})", {"v.json", "sampler.seed"}},
      {R"({"kvscope_view": 1, "sampler": {"greedy": 1}})", {"v.json", "sampler.greedy", "true or false"}},
      {R"({"kvscope_view": 1, "attention": {"layer": -3}})", {"v.json", "attention.layer"}},
      {R"({"kvscope_view": 1, "presentation": "yes"})", {"v.json", "presentation"}},
  };
  for (const Bad& b : bad) expect_error([&] { view_from_json(b.json, "v.json"); }, b.needles, b.json);
}

}  // namespace
}  // namespace kvscope
