// Speculative sampling's acceptance test (model/decoding/speculative_accept.*) against the
// math, with distributions from the independent float64 reference
// (tools/decode_ref.py dist): the standardized distributions match; over
// tens of thousands of fixed seeds the first emitted token is distributed as
// the target's p (total variation < 0.02) whatever the draft, and each
// drafted position is accepted at the rate sum_x min(p(x), q(x)).

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "decode_ref_util.h"
#include "model/core/error.h"
#include "model/decoding/sampler.h"
#include "model/decoding/speculative_accept.h"

namespace kvscope {
namespace {

using testutil::json;

using testutil::run_decode_ref;

std::vector<float> random_logits(int n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(static_cast<size_t>(n));
  for (float& x : l) x = nd(rng);
  return l;
}

struct RefDist {
  TokenDist p, q, residual;
  double overlap = 0;
};

// The reference's p, q, residual and overlap for each (logits_p, logits_q, settings).
std::vector<RefDist> reference_dists(const std::vector<std::pair<std::vector<float>, std::vector<float>>>& logits,
                                     const std::vector<SamplerSettings>& settings) {
  testutil::TempDir tmp("spec-dist");
  json req = {{"cases", json::array()}};
  for (size_t i = 0; i < logits.size(); ++i) {
    const SamplerSettings& s = settings[i];
    req["cases"].push_back({{"logits_p", logits[i].first},
                            {"logits_q", logits[i].second},
                            {"temperature", s.temperature},
                            {"top_k", s.top_k},
                            {"top_p", s.top_p},
                            {"greedy", s.greedy}});
  }
  testutil::write_file(tmp / "in.json", req.dump());
  run_decode_ref(
      "dist --in " + testutil::shell_quote(tmp / "in.json") + " --out " + testutil::shell_quote(tmp / "out.json"),
      tmp / "log.txt");
  std::vector<RefDist> out;
  const json res = testutil::read_json(tmp / "out.json");
  for (const json& c : res.at("cases")) {
    RefDist d;
    d.p = c.at("p").get<TokenDist>();
    d.q = c.at("q").get<TokenDist>();
    d.residual = c.at("residual").get<TokenDist>();
    d.overlap = c.at("overlap").get<double>();
    out.push_back(std::move(d));
  }
  return out;
}

double total_variation(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
  return s / 2;
}

SamplerSettings sampled(float t, int k, float p) {
  SamplerSettings s;
  s.greedy = false;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  return s;
}

// A few settings, vocabularies small enough for a 2e-2 TV bound at 4e4 draws.
struct Case {
  int vocab;
  SamplerSettings s;
};
const std::vector<Case> kCases = {
    {10, sampled(1.0f, 0, 1.0f)},
    {40, sampled(0.8f, 8, 1.0f)},
    {40, sampled(1.2f, 0, 0.7f)},
    {30, sampled(1.0f, 12, 0.9f)},
};

TEST(Speculative, DistributionsMatchReference) {
  std::vector<std::pair<std::vector<float>, std::vector<float>>> logits;
  std::vector<SamplerSettings> settings;
  for (size_t i = 0; i < kCases.size(); ++i) {
    logits.emplace_back(random_logits(kCases[i].vocab, 10 + i, 2.0f), random_logits(kCases[i].vocab, 50 + i, 2.0f));
    settings.push_back(kCases[i].s);
  }
  SamplerSettings greedy;
  logits.emplace_back(random_logits(20, 99, 2.0f), random_logits(20, 98, 2.0f));
  settings.push_back(greedy);
  const std::vector<RefDist> ref = reference_dists(logits, settings);
  ASSERT_EQ(ref.size(), logits.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const TokenDist p = sampling_distribution(logits[i].first, {}, settings[i]);
    const TokenDist q = sampling_distribution(logits[i].second, {}, settings[i]);
    ASSERT_EQ(p.size(), ref[i].p.size());
    for (size_t t = 0; t < p.size(); ++t) {
      EXPECT_NEAR(p[t], ref[i].p[t], 1e-6) << "case " << i << " token " << t;
      EXPECT_NEAR(q[t], ref[i].q[t], 1e-6) << "case " << i << " token " << t;
    }
    const TokenDist res = residual_distribution(p, q);
    for (size_t t = 0; t < p.size(); ++t) EXPECT_NEAR(res[t], ref[i].residual[t], 1e-6) << "case " << i;
    EXPECT_NEAR(acceptance_probability(p, q), ref[i].overlap, 1e-6) << "case " << i;
  }
  // The sampler draws from the same distribution: its reported probability agrees.
  Sampler sm(kCases[1].s);
  const SampleResult r = sm.sample(logits[1].first, {}, 10);
  EXPECT_GT(sampling_distribution(logits[1].first, {}, kCases[1].s)[static_cast<size_t>(r.token)], 0.0);
}

TEST(Speculative, FirstEmittedTokenIsDistributedAsTarget) {
  constexpr int kSeeds = 40000;
  std::vector<std::pair<std::vector<float>, std::vector<float>>> logits;
  std::vector<SamplerSettings> settings;
  for (size_t i = 0; i < kCases.size(); ++i) {
    // The draft is a different, flatter model: plenty of rejections.
    logits.emplace_back(random_logits(kCases[i].vocab, 200 + i, 2.0f), random_logits(kCases[i].vocab, 300 + i, 1.0f));
    settings.push_back(kCases[i].s);
  }
  const std::vector<RefDist> ref = reference_dists(logits, settings);
  ASSERT_EQ(ref.size(), logits.size());
  for (size_t c = 0; c < ref.size(); ++c) {
    const TokenDist p = sampling_distribution(logits[c].first, {}, settings[c]);
    const TokenDist q = sampling_distribution(logits[c].second, {}, settings[c]);
    for (int k : {1, 3}) {
      std::vector<double> hist(p.size(), 0.0);
      int rejected_first = 0;
      for (int seed = 0; seed < kSeeds; ++seed) {
        UniformSource u(static_cast<uint64_t>(seed) * 7919 + c);
        std::vector<int> drafted;
        std::vector<TokenDist> qs, ps;
        for (int i = 0; i < k; ++i) {
          drafted.push_back(draw_token(q, u.next()));
          qs.push_back(q);
          ps.push_back(p);
        }
        ps.push_back(p);
        const Verification v = verify_draft(drafted, qs, ps, u);
        const int first = v.n_accepted > 0 ? drafted[0] : v.next_token;
        rejected_first += v.n_accepted == 0 ? 1 : 0;
        hist[static_cast<size_t>(first)] += 1.0 / kSeeds;
      }
      EXPECT_LT(total_variation(hist, ref[c].p), 0.02) << "case " << c << " K=" << k;
      EXPECT_GT(rejected_first, kSeeds / 20) << "case " << c << ": the draft should often be rejected";
    }
  }
}

TEST(Speculative, PerPositionAcceptanceConvergesToOverlap) {
  constexpr int kSeeds = 40000;
  constexpr int K = 4;
  const SamplerSettings s = sampled(1.0f, 0, 1.0f);
  std::vector<std::pair<std::vector<float>, std::vector<float>>> logits;
  for (int i = 0; i < K + 1; ++i)
    logits.emplace_back(random_logits(16, 400 + i, 2.0f), random_logits(16, 500 + i, 0.5f + 0.5f * i));
  const std::vector<RefDist> ref = reference_dists(logits, std::vector<SamplerSettings>(logits.size(), s));
  ASSERT_EQ(ref.size(), logits.size());
  std::vector<TokenDist> p, q;
  for (int i = 0; i <= K; ++i) {
    p.push_back(sampling_distribution(logits[static_cast<size_t>(i)].first, {}, s));
    q.push_back(sampling_distribution(logits[static_cast<size_t>(i)].second, {}, s));
  }
  q.pop_back();
  std::vector<int> reached(K, 0), accepted(K, 0);
  for (int seed = 0; seed < kSeeds; ++seed) {
    UniformSource u(1000003ull * seed + 17);
    std::vector<int> drafted;
    for (int i = 0; i < K; ++i) drafted.push_back(draw_token(q[static_cast<size_t>(i)], u.next()));
    const Verification v = verify_draft(drafted, q, p, u);
    for (int i = 0; i < K; ++i) {
      if (v.drafted[static_cast<size_t>(i)].r < 0) break;
      ++reached[static_cast<size_t>(i)];
      accepted[static_cast<size_t>(i)] += v.drafted[static_cast<size_t>(i)].accepted ? 1 : 0;
    }
  }
  for (int i = 0; i < K; ++i) {
    ASSERT_GT(reached[static_cast<size_t>(i)], 1000) << "position " << i;
    const double rate = static_cast<double>(accepted[static_cast<size_t>(i)]) / reached[static_cast<size_t>(i)];
    const double tol = 4 * std::sqrt(ref[static_cast<size_t>(i)].overlap * (1 - ref[static_cast<size_t>(i)].overlap) /
                                     reached[static_cast<size_t>(i)]) +
                       1e-3;
    EXPECT_NEAR(rate, ref[static_cast<size_t>(i)].overlap, tol) << "position " << i;
  }
}

TEST(Speculative, GreedyAcceptsWhileArgmaxesAgree) {
  SamplerSettings g;  // greedy
  const std::vector<float> a = {0.1f, 3.0f, 0.2f}, b = {2.0f, 0.5f, 0.1f};
  const TokenDist pa = sampling_distribution(a, {}, g), pb = sampling_distribution(b, {}, g);
  EXPECT_EQ(pa, (TokenDist{0, 1, 0}));
  UniformSource u(5);
  // Draft proposed 1 (agrees), then 1 where the target wants 0: one accepted, replacement 0.
  const Verification v = verify_draft({1, 1}, {pa, pa}, {pa, pb, pa}, u);
  EXPECT_EQ(v.n_accepted, 1);
  EXPECT_FALSE(v.bonus);
  EXPECT_EQ(v.next_token, 0);
  const Verification all = verify_draft({1}, {pa}, {pa, pb}, u);
  EXPECT_EQ(all.n_accepted, 1);
  EXPECT_TRUE(all.bonus);
  EXPECT_EQ(all.next_token, 0);
}

TEST(Speculative, RejectsMalformedInput) {
  UniformSource u(1);
  EXPECT_THROW(verify_draft({0}, {{1.0}}, {{1.0}}, u), Error);
  EXPECT_THROW(acceptance_probability({0.5, 0.5}, {1.0}), Error);
  EXPECT_THROW(draw_token({0.0, 0.0}, 0.5), Error);
}

TEST(Speculative, LeviathanFormula) {
  // alpha = 1: K + 1 tokens per target forward; cost ratio 0: that is the speed-up.
  EXPECT_DOUBLE_EQ(expected_tokens_per_iteration(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(predicted_speedup(1.0, 4, 0.0), 5.0);
  EXPECT_DOUBLE_EQ(predicted_speedup(0.0, 4, 0.25), 1.0 / 2.0);
  // The formula written out: (1 - alpha^(K+1)) / ((1 - alpha)(K c + 1)).
  EXPECT_NEAR(predicted_speedup(0.8, 5, 0.05), (1 - std::pow(0.8, 6)) / (0.2 * 1.25), 1e-12);
}

}  // namespace
}  // namespace kvscope
