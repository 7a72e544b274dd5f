// The Llama-architecture forward (Llama, Mistral, Qwen2) against an
// independent float64 NumPy forward (tools/numpy_ref_llama.py) on random
// checkpoints: GQA ratios 1 to 4, tied and untied heads, rope_scaling llama3
// and linear, Qwen2's q/k/v biases, a Mistral sliding window, an explicit
// head_dim, sharded and single files, F32/F16/BF16. Greedy tokens identical;
// logits, attention and K/V rows within 1e-4 with the cache and without;
// the FLOP counter equals the formula; every cache layout runs the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/arch/model.h"
#include "model/core/error.h"
#include "model/decoding/generator.h"
#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

using testutil::json;

constexpr double kTol = 1e-4;

const char* const kCheckpoints[] = {"llama_gqa1_f32_tied_single", "llama_gqa3_bf16_untied_sharded_llama3",
                                    "qwen2_gqa4_f32_bias_sharded", "mistral_gqa4_bf16_untied_window",
                                    "llama_gqa2_f16_headdim_linear"};

struct Step {
  int seq_len = 0, token = 0, n_rows = 0;
  std::vector<double> logits, attn, k, v;
};

struct Case {
  std::string dir;
  std::vector<int> prompt, tokens;
  int n_steps = 0;
  std::vector<Step> steps;
};

Case load_case(const std::string& name) {
  Case c;
  c.dir = testutil::llama_suite_dir() + "/" + name;
  const json ref = testutil::read_json(c.dir + "/ref.json");
  c.prompt = ref.at("prompt").get<std::vector<int>>();
  c.tokens = ref.at("tokens").get<std::vector<int>>();
  c.n_steps = ref.at("n_steps");
  for (const json& s : ref.at("steps")) {
    Step st;
    st.seq_len = s.at("seq_len");
    st.token = s.at("token");
    st.n_rows = s.at("n_rows");
    st.logits = s.at("logits").get<std::vector<double>>();
    st.attn = s.at("attn").get<std::vector<double>>();
    st.k = s.at("k").get<std::vector<double>>();
    st.v = s.at("v").get<std::vector<double>>();
    c.steps.push_back(std::move(st));
  }
  return c;
}

template <class A, class B>
double max_abs_diff(const A& a, const B& b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

class LlamaReference : public ::testing::TestWithParam<const char*> {};

// Engine::forward step by step, KV CACHE and NO CACHE, against every reference step.
TEST_P(LlamaReference, EngineMatchesBothModes) {
  const Case rc = load_case(GetParam());
  std::shared_ptr<const Model> m = load_model(rc.dir);
  const Config& c = m->config;
  const int L = c.n_layer, H = c.n_head, V = c.vocab_size, kvd = c.kv_heads() * c.head_dim();
  Engine eng(*m);
  KVCache cache(KVLayout::for_model(c));
  std::vector<int> tokens = rc.prompt;
  for (int s = 0; s <= rc.n_steps; ++s) {
    const Step& ref = rc.steps[static_cast<size_t>(s)];
    const int T = ref.seq_len;
    ASSERT_EQ(static_cast<int>(tokens.size()), T);
    const std::string where = std::string(GetParam()) + " step " + std::to_string(s);
    const int first = s == 0 ? 0 : T - 1;
    ForwardOutput kv = eng.forward(tokens, first, &cache, s == 0);
    ASSERT_EQ(static_cast<int>(kv.logits.size()), V) << where;
    EXPECT_LE(max_abs_diff(kv.logits, ref.logits, V), kTol) << where << " KV logits";
    ASSERT_EQ(kv.attn.size(), static_cast<size_t>(L) * H * kv.n_rows * T) << where;
    EXPECT_LE(max_abs_diff(kv.attn, ref.attn, kv.attn.size()), kTol) << where << " KV attention";
    ASSERT_EQ(kv.k.size(), static_cast<size_t>(L) * kv.n_new * kvd) << where;
    EXPECT_LE(max_abs_diff(kv.k, ref.k, kv.k.size()), kTol) << where << " KV k (after RoPE)";
    EXPECT_LE(max_abs_diff(kv.v, ref.v, kv.v.size()), kTol) << where << " KV v";
    EXPECT_EQ(kv.flops, forward_flops(c, kv.n_new, T)) << where;

    ForwardOutput nc = eng.forward(tokens, 0, nullptr, false);
    EXPECT_LE(max_abs_diff(nc.logits, ref.logits, V), kTol) << where << " NO CACHE logits";
    EXPECT_EQ(nc.flops, forward_flops(c, T, T)) << where;
    ASSERT_EQ(nc.attn.size(), static_cast<size_t>(L) * H * T) << where;
    double worst = 0;
    for (int lh = 0; lh < L * H; ++lh)
      for (int key = 0; key < T; ++key)
        worst = std::max(worst, std::fabs(nc.attn[static_cast<size_t>(lh) * T + key] -
                                          ref.attn[(static_cast<size_t>(lh) * ref.n_rows + ref.n_rows - 1) * T + key]));
    EXPECT_LE(worst, kTol) << where << " NO CACHE attention";
    tokens.push_back(ref.token);
    if (HasFatalFailure()) return;
  }
}

// Greedy decoding of the reference's number of steps, past any end-of-text.
GenerateOptions greedy_options(const Case& rc, CacheMode mode, const KVLayout& kv) {
  GenerateOptions opt;
  opt.max_new = rc.n_steps + 1;
  opt.sampler.greedy = true;
  opt.ignore_eos = true;
  opt.mode = mode;
  opt.kv = kv;
  return opt;
}

// The generator, greedy, in both modes: the reference's tokens exactly.
TEST_P(LlamaReference, GeneratorTokensBothModes) {
  const Case rc = load_case(GetParam());
  std::shared_ptr<const Model> m = load_model(rc.dir);
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    Generator gen(m);
    gen.start_tokens(rc.prompt, greedy_options(rc, mode, KVLayout{}));
    while (gen.step()) {
    }
    EXPECT_EQ(gen.tokens(), rc.tokens) << GetParam() << (mode == CacheMode::kKV ? " KV CACHE" : " NO CACHE");
  }
}

// Every cache layout runs these models: paged f32 gives the reference's tokens
// exactly; f16 and the block formats (where n_kv_head * head_dim is a multiple
// of 32) give finite logits close to it; a window bounds what the K/V heads
// hold, in both modes; the cache's bytes are n_kv_head * head_dim wide.
TEST_P(LlamaReference, EveryCacheLayout) {
  const Case rc = load_case(GetParam());
  std::shared_ptr<const Model> m = load_model(rc.dir);
  const Config& c = m->config;
  const int kvd = c.kv_heads() * c.head_dim();
  struct Setting {
    KVDtype dtype;
    int window, sinks, block;
  };
  const Setting settings[] = {{KVDtype::kF32, 0, 0, 4},  {KVDtype::kF16, 0, 0, 0}, {KVDtype::kQ8_0, 0, 0, 8},
                              {KVDtype::kQ4_0, 0, 0, 0}, {KVDtype::kF32, 6, 2, 0}, {KVDtype::kF16, 5, 1, 4}};
  for (const Setting& st : settings) {
    KVLayout kv;
    kv.dtype = st.dtype;
    kv.window = st.window;
    kv.sinks = st.sinks;
    kv.block = st.block;
    const std::string where = std::string(GetParam()) + " " + to_string(st.dtype) + " window " +
                              std::to_string(st.window) + " block " + std::to_string(st.block);
    const bool blocks = st.dtype == KVDtype::kQ8_0 || st.dtype == KVDtype::kQ4_0;
    if (blocks && kvd % 32 != 0) {
      EXPECT_THROW(kv.on_model(c), Error) << where;
      continue;
    }
    const KVLayout lay = kv.on_model(c);
    EXPECT_EQ(lay.n_kv_head, c.kv_heads()) << where;
    EXPECT_EQ(lay.bytes_per_position(), 2ull * c.n_layer * kv_row_bytes(st.dtype, kvd)) << where;
    if (c.sliding_window > 0) {
      EXPECT_LE(lay.window, c.sliding_window) << where;
    }
    for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
      Generator gen(m);
      gen.start_tokens(rc.prompt, greedy_options(rc, mode, kv));
      int s = 0;
      while (RecordPtr rec = gen.step()) {
        for (float x : rec->logits) ASSERT_TRUE(std::isfinite(x)) << where << " step " << s;
        if (mode == CacheMode::kKV && lay.windowed()) {
          EXPECT_LE(rec->kv_positions, lay.window + lay.sinks) << where << " step " << s;
        }
        if (st.dtype == KVDtype::kF32 && st.window == 0) {
          EXPECT_LE(max_abs_diff(rec->logits, rc.steps[static_cast<size_t>(s)].logits, rec->logits.size()), kTol)
              << where << " step " << s;
        }
        ++s;
      }
      if (st.dtype == KVDtype::kF32 && st.window == 0) {
        EXPECT_EQ(gen.tokens(), rc.tokens) << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RandomCheckpoints, LlamaReference, ::testing::ValuesIn(kCheckpoints));

// LoadControl::bf16_products (--bf16-products): every BF16 matrix product's
// inputs rounded to bf16, against the reference that rounds them too. Logits
// within kBf16Tol at every step in both modes, while the engine that keeps
// f32 inputs lies further than kBf16Off from that reference (the rounding is
// what both model, not noise); the reference's greedy tokens in both modes.
TEST(LlamaReferenceBf16, ProductsMatchTheRoundedReference) {
  constexpr double kBf16Tol = kTol, kBf16Off = 1e-2;
  const Case rc = load_case("llama_gqa3_bf16_products");
  LoadControl control;
  control.bf16_products = true;
  std::shared_ptr<const Model> m = load_model(rc.dir, control), f32_inputs = load_model(rc.dir);
  ASSERT_TRUE(m->bf16_products);
  const int V = m->config.vocab_size;
  Engine eng(*m), eng_f32(*f32_inputs);
  KVCache cache(KVLayout::for_model(m->config)), cache_f32(KVLayout::for_model(m->config));
  std::vector<int> tokens = rc.prompt;
  double worst = 0, off = 0;
  for (int s = 0; s <= rc.n_steps; ++s) {
    const Step& ref = rc.steps[static_cast<size_t>(s)];
    const int first = s == 0 ? 0 : ref.seq_len - 1;
    const ForwardOutput kv = eng.forward(tokens, first, &cache, false);
    const ForwardOutput nc = eng.forward(tokens, 0, nullptr, false);
    const ForwardOutput f32 = eng_f32.forward(tokens, first, &cache_f32, false);
    worst = std::max({worst, max_abs_diff(kv.logits, ref.logits, V), max_abs_diff(nc.logits, ref.logits, V)});
    off = std::max(off, max_abs_diff(f32.logits, ref.logits, V));
    tokens.push_back(ref.token);
  }
  EXPECT_LE(worst, kBf16Tol);
  EXPECT_GE(off, kBf16Off);
  for (CacheMode mode : {CacheMode::kKV, CacheMode::kNoCache}) {
    Generator gen(m);
    gen.start_tokens(rc.prompt, greedy_options(rc, mode, KVLayout{}));
    while (gen.step()) {
    }
    EXPECT_EQ(gen.tokens(), rc.tokens) << (mode == CacheMode::kKV ? "KV CACHE" : "NO CACHE");
  }
  std::printf("bf16 products: logits within %.2g of the rounded reference; f32 inputs %.2g away\n", worst, off);
}

}  // namespace
}  // namespace kvscope
