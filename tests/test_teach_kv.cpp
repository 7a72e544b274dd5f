// The KV memory calculator against the article's numbers and hand-computed
// published configurations.
#include <gtest/gtest.h>

#include "model/core/units.h"
#include "teach_test_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace teachtest;

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
  EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kF16), 32ull * 4096 * 2 * 2);
  EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kF16), 524288u);
  EXPECT_EQ(format_bytes(524288), "512 KiB");
  const uint64_t at_100k = kv_cache_bytes(m, 100000, KVDtype::kF16);
  EXPECT_EQ(at_100k, 100000ull * 524288);
  EXPECT_EQ(at_100k, 52428800000ull);
  EXPECT_EQ(format_bytes_decimal(static_cast<double>(at_100k)), "52.4 GB");
  EXPECT_EQ(format_bytes(static_cast<double>(at_100k)), "48.8 GiB");  // "~50 GB" either way

  // The shipped table reproduces it with its 32-layer 4096-wide MHA entry.
  const std::vector<KvModelSpec> shipped = shipped_configs();  // find_spec returns a reference into it
  const KvModelSpec& mha = find_spec(shipped, "32-layer 4096-wide MHA (Llama-2-7B)");
  EXPECT_EQ(mha.hidden, 4096);
  EXPECT_EQ(kv_bytes_per_token(mha, KVDtype::kF16), 524288u);
  EXPECT_EQ(kv_cache_bytes(mha, 100000, KVDtype::kF16), 52428800000ull);
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
    EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kF16), h.fp16_per_token) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kF32), 2 * h.fp16_per_token) << h.name;
    // ggml's block formats, scales counted: q8_0 34 bytes and q4_0 18 bytes per 32 values.
    const uint64_t values = 2ull * h.layers * h.kv * h.hd;
    EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kQ8_0), values / 32 * 34) << h.name;
    EXPECT_EQ(kv_bytes_per_token(m, KVDtype::kQ4_0), values / 32 * 18) << h.name;
  }
  // A few cache sizes multiplied out by hand.
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "GPT-2 small"), 1024, KVDtype::kF32), 75497472u);   // 73728 * 1024
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "Llama-3-8B"), 8192, KVDtype::kF16), 1073741824u);  // 1 GiB
  EXPECT_EQ(kv_cache_bytes(find_spec(all, "Llama-3-70B"), 1000000, KVDtype::kF16), 327680000000ull);
  // Mistral's window: at 100K tokens the cache holds 4096 positions, 512 MiB.
  const KvModelSpec& mistral = find_spec(all, "Mistral-7B v0.1");
  EXPECT_EQ(cached_positions(mistral, 100000), 4096u);
  EXPECT_EQ(cached_positions(mistral, 4000), 4000u);
  EXPECT_EQ(kv_cache_bytes(mistral, 100000, KVDtype::kF16), 536870912u);
  EXPECT_EQ(kv_cache_bytes(mistral, 1000000, KVDtype::kF16), 536870912u);
  EXPECT_EQ(kv_cache_bytes(mistral, 4000, KVDtype::kF16), 4000ull * 131072);
  // GQA's saving, visible: Llama-3-8B holds a quarter of the same-width MHA model's cache.
  EXPECT_EQ(kv_bytes_per_token(find_spec(all, "32-layer 4096-wide MHA (Llama-2-7B)"), KVDtype::kF16),
            4 * kv_bytes_per_token(find_spec(all, "Llama-3-8B"), KVDtype::kF16));
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
  FitCheck f = check_fit(l8, 8192, KVDtype::kF16, KVDtype::kF16);
  EXPECT_EQ(f.weights_bytes, 16060522496ull);
  EXPECT_EQ(f.cache_bytes, 1073741824ull);
  EXPECT_EQ(f.total_bytes, 16060522496ull + 1073741824ull);
  EXPECT_TRUE(f.total_fits_24);
  EXPECT_FALSE(f.beyond_context);
  // At 128K (past its 8K context): 16 GiB of cache, 33.2e9 in all: only the 80 GB card.
  f = check_fit(l8, 131072, KVDtype::kF16, KVDtype::kF16);
  EXPECT_EQ(f.cache_bytes, 131072ull * 131072);
  EXPECT_TRUE(f.beyond_context);
  EXPECT_TRUE(f.cache_fits_24);
  EXPECT_FALSE(f.total_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // Llama-3-70B: fp16 weights (141e9 B) fit neither; q4_0 weights (39.7e9: 18 bytes per 32) fit 80 only.
  const KvModelSpec& l70 = find_spec(all, "Llama-3-70B");
  f = check_fit(l70, 8192, KVDtype::kF16, KVDtype::kF16);
  EXPECT_EQ(f.weights_bytes, 141107412992ull);
  EXPECT_FALSE(f.total_fits_80);
  f = check_fit(l70, 8192, KVDtype::kQ4_0, KVDtype::kQ4_0);
  EXPECT_EQ(f.weights_bytes, 70553706496ull / 32 * 18);              // 141107412992 / 2 params
  EXPECT_EQ(f.cache_bytes, 8192ull * 2 * 80 * (8 * 128 / 32 * 18));  // 80 layers, 8 KV heads of 128
  EXPECT_FALSE(f.total_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // The article's model at 100K fp16: 13.5e9 weights + 52.4e9 cache = 65.9e9 <= 80 GiB.
  f = check_fit(find_spec(all, "32-layer 4096-wide MHA (Llama-2-7B)"), 100000, KVDtype::kF16, KVDtype::kF16);
  EXPECT_EQ(f.total_bytes, 2 * 6738415616ull + 52428800000ull);
  EXPECT_FALSE(f.cache_fits_24);
  EXPECT_TRUE(f.total_fits_80);
  // Card sizes are binary.
  EXPECT_EQ(kGpu24GB, 25769803776ull);
  EXPECT_EQ(kGpu80GB, 85899345920ull);
  // A last partial block of weights is stored whole.
  KvModelSpec odd;
  odd.params = 33;
  EXPECT_EQ(weights_bytes(odd, KVDtype::kQ4_0), 2u * 18);
  EXPECT_EQ(weights_bytes(odd, KVDtype::kQ8_0), 2u * 34);
  EXPECT_EQ(weights_bytes(odd, KVDtype::kF16), 66u);
}

TEST(KvCalc, CurrentModelMatchesEngine) {
  const std::shared_ptr<const Model> m = teach_model();
  const KvModelSpec s = spec_from_config(m->config, m->name, m->n_params);
  EXPECT_EQ(kv_bytes_per_token(s, KVDtype::kF32), kv_bytes_per_position(m->config));
  EXPECT_EQ(kv_bytes_per_token(s, KVDtype::kF32), 2ull * 4 * 160 * 4);
  // And what the engine really holds after a generation.
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 5;
  const auto recs = run(gen, test_prompt(), opt);
  EXPECT_EQ(recs.back()->kv_bytes, kv_cache_bytes(s, static_cast<uint64_t>(recs.back()->seq_len), KVDtype::kF32));
}

TEST(KvCalc, QuantizedCachesCountTheBytesTheCacheStores) {
  EXPECT_EQ(bytes_per_value(KVDtype::kF32), 4.0);
  EXPECT_EQ(bytes_per_value(KVDtype::kF16), 2.0);
  EXPECT_EQ(bytes_per_value(KVDtype::kQ8_0), 34.0 / 32);  // 32 int8 + an fp16 scale
  EXPECT_EQ(bytes_per_value(KVDtype::kQ4_0), 18.0 / 32);  // 32 nibbles + an fp16 scale
  // The loaded model (4 layers, K/V rows of 160 values) with a quantized
  // cache: the calculator says what the engine's cache really held.
  const std::shared_ptr<const Model> m = teach_model();
  const KvModelSpec s = spec_from_config(m->config, m->name, m->n_params);
  for (KVDtype d : {KVDtype::kQ8_0, KVDtype::kQ4_0}) {
    const uint64_t block = d == KVDtype::kQ8_0 ? 34 : 18;
    EXPECT_EQ(kv_bytes_per_token(s, d), 2ull * 4 * (160 / 32) * block) << to_string(d);
    Generator gen(m);
    GenerateOptions opt;
    opt.max_new = 4;
    opt.kv.dtype = d;
    const auto recs = run(gen, test_prompt(), opt);
    EXPECT_EQ(recs.back()->kv_bytes, kv_cache_bytes(s, static_cast<uint64_t>(recs.back()->seq_len), d)) << to_string(d);
  }
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

}  // namespace
}  // namespace kvscope
