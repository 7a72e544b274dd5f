// Sampling made visible against an independent double-precision reference
// and against the tokens the engine's Sampler really picked.
#include <gtest/gtest.h>

#include "teach_test_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace teachtest;

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

}  // namespace
}  // namespace kvscope
