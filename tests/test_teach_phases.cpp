// Prefill vs decode, measured from real records.
#include <gtest/gtest.h>

#include "teach_test_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace teachtest;

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
// vector values, the LM head (V x d, matrix width), ln_f and one wpe row (f32),
// one wte row (matrix width: the embedding is the LM head's matrix); plus, on
// the cache, 2 x L x T x d f32 K/V values.

void expect_read_bytes(const Model& m, const std::vector<RecordPtr>& recs) {
  const Config& c = m.config;
  const uint64_t mw = m.stored_dtype == "F16" ? 2 : 4;
  const uint64_t d = static_cast<uint64_t>(c.n_embd), L = static_cast<uint64_t>(c.n_layer);
  const uint64_t weights =
      L * (12 * d * d * mw + 13 * d * 4) + static_cast<uint64_t>(c.vocab_size) * d * mw + 3 * d * 4 + d * mw;
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

}  // namespace
}  // namespace kvscope
