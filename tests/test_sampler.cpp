// Sampler properties: temperature -> 0 equals greedy, top-k never leaves the
// top k, top-p keeps the smallest set reaching p, repetition penalty divides
// positive and multiplies negative logits, the same seed gives the same tokens.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "model/decoding/sampler.h"

namespace kvscope {
namespace {

// Distinct logits (no ties) with a clear spread.
std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = nd(rng);
  return l;
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int> order_desc(const std::vector<float>& v) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
  return idx;
}

TEST(Sampler, SoftmaxMatchesDefinition) {
  const std::vector<float> l = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
  for (float t : {1.0f, 0.5f, 2.0f}) {
    const std::vector<float> p = softmax(l, t);
    ASSERT_EQ(p.size(), l.size());
    double z = 0;
    for (float x : l) z += std::exp(static_cast<double>(x) / t);
    for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(p[i], std::exp(l[i] / t) / z, 1e-6) << "t=" << t;
  }
  // Large logits do not overflow.
  const std::vector<float> p = softmax({1000.0f, 999.0f, -1000.0f});
  EXPECT_NEAR(p[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(p[2], 0.0, 1e-12);
  EXPECT_FALSE(std::isnan(p[0]));
}

// Every chunk of the vectorised softmax, the full ones and the padded last,
// against the definition in double; far below the largest logit a
// probability is exactly 0 (the same in every build).
TEST(Sampler, SoftmaxMatchesADoubleReferenceInEveryChunk) {
  for (size_t n : {37u, 1003u, 50257u}) {
    const std::vector<float> l = random_logits(static_cast<int>(n), 40 + static_cast<uint32_t>(n), 4.0f);
    for (float t : {1.0f, 0.7f}) {
      const std::vector<float> p = softmax(l, t);
      const double mx = *std::max_element(l.begin(), l.end());
      double z = 0, sum = 0;
      for (float x : l) z += std::exp((static_cast<double>(x) - mx) / t);
      for (size_t i = 0; i < n; ++i) {
        const double arg = (static_cast<double>(l[i]) - mx) / t, want = std::exp(arg) / z;
        // exp's argument is rounded to float first: a relative error of up
        // to |arg| 2^-24 in the result, beside exp's own few ulp.
        ASSERT_NEAR(p[i], want, want * (1e-6 + 1.2e-7 * std::fabs(arg)) + 1e-30)
            << "n=" << n << " t=" << t << " i=" << i;
        sum += p[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "n=" << n;
    }
  }
  std::vector<float> far(40, 0.0f);
  far[3] = -90.0f;   // exp(-90) is below the smallest normal float
  far[33] = -1e30f;  // in the padded last chunk
  const std::vector<float> p = softmax(far);
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_EQ(p[33], 0.0f);
  EXPECT_NEAR(p[0], 1.0 / 38.0, 1e-7);
}

// log softmax in double against the definition in long double, and the same
// values wherever the logits lie in memory (one element further on).
TEST(Sampler, LogSoftmaxMatchesALongDoubleReferenceAtAnyAddress) {
  for (size_t n : {1u, 37u, 50257u}) {
    const std::vector<float> l = random_logits(static_cast<int>(n), 7 + static_cast<uint32_t>(n), 4.0f);
    long double mx = l[0], z = 0;
    for (float x : l) mx = std::max<long double>(mx, x);
    for (float x : l) z += std::exp(static_cast<long double>(x) - mx);
    const std::vector<double> got = log_softmax(l.data(), n);
    ASSERT_EQ(got.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const long double want = static_cast<long double>(l[i]) - mx - std::log(z);
      ASSERT_NEAR(got[i], static_cast<double>(want), 1e-12) << "n=" << n << " i=" << i;
    }
    std::vector<float> shifted(n + 1);
    std::copy(l.begin(), l.end(), shifted.begin() + 1);
    EXPECT_EQ(log_softmax(shifted.data() + 1, n), got) << "n=" << n;
  }
  EXPECT_TRUE(log_softmax(nullptr, 0).empty());
}

// Top-p after the one-pass top-k (a large vocabulary): the smallest prefix of
// the stable order reaching p of what top-k kept.
TEST(Sampler, KeptIndicesTopPAfterTopKOverALargeVocabulary) {
  const std::vector<float> probs = softmax(random_logits(50257, 3, 2.0f));
  std::vector<int> sorted(probs.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  for (int k : {5, 50}) {
    double total = 0;
    for (int i = 0; i < k; ++i) total += probs[sorted[i]];
    for (float top_p : {0.3f, 0.9f}) {
      size_t n = 0;
      double cum = 0;
      while (n < static_cast<size_t>(k) && cum < top_p) cum += probs[sorted[n++]] / total;
      EXPECT_EQ(kept_indices(probs, k, top_p), std::vector<int>(sorted.begin(), sorted.begin() + n))
          << "k=" << k << " p=" << top_p;
    }
  }
}

// A -0 among the probabilities (its sign bit set) ranks as 0, not above every
// positive value.
TEST(Sampler, KeptIndicesRanksNegativeZeroAsZero) {
  std::vector<float> probs(64, -0.0f);
  probs[40] = 0.5f;
  probs[63] = 0.25f;
  EXPECT_EQ(kept_indices(probs, 2, 1.0f), (std::vector<int>{40, 63}));
}

// Equal logits get equal probabilities wherever they stand (a vectorised exp
// must not treat an unaligned head or tail differently from the rest).
TEST(Sampler, SoftmaxGivesEqualLogitsEqualProbabilities) {
  const std::vector<float> values = random_logits(61, 11);
  for (size_t n : {1003u, 1008u, 37u}) {
    std::vector<float> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = values[(i * 7) % values.size()];
    const std::vector<float> p = softmax(l, 0.8f);
    std::map<float, float> first;  // logit -> its probability where first seen
    for (size_t i = 0; i < n; ++i) {
      const auto [it, fresh] = first.emplace(l[i], p[i]);
      if (!fresh) {
        ASSERT_EQ(p[i], it->second) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(Sampler, GreedyIsArgmax) {
  SamplerSettings s;
  s.greedy = true;
  Sampler sm(s);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto l = random_logits(300, seed);
    const SampleResult r = sm.sample(l, {}, 10);
    EXPECT_EQ(r.token, argmax(l));
    EXPECT_EQ(r.draw, -1.0f);
    const auto p = softmax(l);
    EXPECT_NEAR(r.prob, p[r.token], 1e-6);
    ASSERT_EQ(r.top.size(), 10u);
    const auto ord = order_desc(l);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(r.top[i].token, ord[i]);
      EXPECT_NEAR(r.top[i].prob, p[ord[i]], 1e-6);
    }
  }
  // n_top larger than the vocabulary.
  const SampleResult small = sm.sample({0.1f, 0.3f, 0.2f}, {}, 10);
  EXPECT_EQ(small.top.size(), 3u);
  EXPECT_EQ(small.token, 1);
}

TEST(Sampler, TemperatureToZeroEqualsGreedy) {
  for (uint32_t seed = 0; seed < 30; ++seed) {
    const auto l = random_logits(500, 100 + seed);
    SamplerSettings s;
    s.greedy = false;
    s.temperature = 1e-4f;
    s.seed = seed;
    Sampler sm(s);
    for (int k = 0; k < 5; ++k) EXPECT_EQ(sm.sample(l, {}).token, argmax(l)) << "seed " << seed;
  }
}

TEST(Sampler, TopKNeverLeavesTopK) {
  const auto l = random_logits(200, 7, 0.5f);  // flat: many tokens are likely
  const auto ord = order_desc(l);
  for (int k : {1, 3, 10}) {
    const std::set<int> top(ord.begin(), ord.begin() + k);
    SamplerSettings s;
    s.greedy = false;
    s.temperature = 1.5f;
    s.top_k = k;
    s.seed = 42 + k;
    Sampler sm(s);
    std::set<int> seen;
    for (int i = 0; i < 2000; ++i) {
      const SampleResult r = sm.sample(l, {});
      ASSERT_TRUE(top.count(r.token)) << "k=" << k << " drew token " << r.token;
      seen.insert(r.token);
      EXPECT_GE(r.draw, 0.0f);
      EXPECT_LT(r.draw, 1.0f);
    }
    EXPECT_EQ(seen.size(), top.size()) << "every one of the top " << k << " gets drawn";
  }
}

TEST(Sampler, KeptIndicesTopK) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.05f, 0.3f, 0.15f};
  EXPECT_EQ(kept_indices(probs, 2, 1.0f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept_indices(probs, 1, 1.0f), (std::vector<int>{1}));
  // Off (0) or larger than the vocabulary: everything, best first.
  EXPECT_EQ(kept_indices(probs, 0, 1.0f), (std::vector<int>{1, 3, 4, 0, 2}));
  EXPECT_EQ(kept_indices(probs, 99, 1.0f), (std::vector<int>{1, 3, 4, 0, 2}));
}

// Over a GPT-2-sized vocabulary, with many exact ties and zeros, top-k keeps
// exactly the first k of a stable sort by probability (ties: the lower id),
// the rule the draw and the panels' top lists rely on.
TEST(Sampler, KeptIndicesTopKMatchesAStableSortWithTies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 400);
  std::vector<float> probs(50257);
  for (float& p : probs) p = level(rng) < 40 ? 0.0f : static_cast<float>(level(rng)) * 1e-6f;
  probs[50256] = 1e-3f;  // the best at the very end
  std::vector<int> sorted(probs.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  for (int k : {1, 2, 16, 40, 3000, 3141}) {
    const std::vector<int> kept = kept_indices(probs, k, 1.0f);
    EXPECT_EQ(kept, std::vector<int>(sorted.begin(), sorted.begin() + k)) << "k=" << k;
  }
}

TEST(Sampler, KeptIndicesTopPSmallestSetReachingP) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.05f, 0.3f, 0.15f};  // sorted: .4 .3 .15 .1 .05
  EXPECT_EQ(kept_indices(probs, 0, 0.2f), (std::vector<int>{1}));
  EXPECT_EQ(kept_indices(probs, 0, 0.39f), (std::vector<int>{1}));
  EXPECT_EQ(kept_indices(probs, 0, 0.41f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept_indices(probs, 0, 0.69f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept_indices(probs, 0, 0.71f), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(kept_indices(probs, 0, 0.84f), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(kept_indices(probs, 0, 0.86f), (std::vector<int>{1, 3, 4, 0}));
  EXPECT_EQ(kept_indices(probs, 0, 0.96f), (std::vector<int>{1, 3, 4, 0, 2}));
  // The best token always survives, however small p.
  EXPECT_EQ(kept_indices(probs, 0, 1e-6f), (std::vector<int>{1}));
  // top-k first, then top-p (here p is not reached inside the top 2).
  EXPECT_EQ(kept_indices(probs, 2, 0.99f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept_indices(probs, 3, 0.3f), (std::vector<int>{1}));
  // As Hugging Face's warpers: top-p measures mass in the distribution
  // renormalised over what top-k kept (.4 .3 .15 -> .47 .35 .18).
  EXPECT_EQ(kept_indices(probs, 3, 0.8f), (std::vector<int>{1, 3}));
  EXPECT_EQ(kept_indices(probs, 0, 0.8f), (std::vector<int>{1, 3, 4}));

  // Property on random distributions: the kept set is the shortest prefix of
  // the sorted probabilities whose sum reaches p.
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const auto p = softmax(random_logits(100, 500 + seed, 1.5f));
    const float top_p = 0.05f + 0.9f * static_cast<float>(seed) / 50.0f;
    const auto kept = kept_indices(p, 0, top_p);
    const auto ord = order_desc(p);
    ASSERT_FALSE(kept.empty());
    ASSERT_LE(kept.size(), ord.size());
    double sum = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      EXPECT_EQ(kept[i], ord[i]) << "best first";
      if (i + 1 < kept.size()) {
        EXPECT_LT(sum + p[kept[i]], top_p + 1e-6) << "smallest: p reached before the end";
      }
      sum += p[kept[i]];
    }
    EXPECT_GE(sum, top_p - 1e-5) << "reaches p";
  }
}

TEST(Sampler, TopPNeverLeavesNucleus) {
  const auto l = random_logits(100, 11, 1.0f);
  const auto p = softmax(l);
  const auto nucleus = kept_indices(p, 0, 0.5f);
  const std::set<int> allowed(nucleus.begin(), nucleus.end());
  SamplerSettings s;
  s.greedy = false;
  s.top_p = 0.5f;
  s.seed = 5;
  Sampler sm(s);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int t = sm.sample(l, {}).token;
    ASSERT_TRUE(allowed.count(t)) << "token " << t << " outside the nucleus";
    counts[t]++;
  }
  // Frequencies follow the renormalised nucleus.
  double mass = 0;
  for (int t : nucleus) mass += p[t];
  for (int t : nucleus) EXPECT_NEAR(counts[t] / static_cast<double>(n), p[t] / mass, 0.02) << "token " << t;
}

TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> l = {0.0f, 1.0f, 2.0f, -1.0f};
  SamplerSettings s;
  s.greedy = false;
  s.temperature = 1.0f;
  s.seed = 3;
  Sampler sm(s);
  const auto p = softmax(l);
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) counts[sm.sample(l, {}).token]++;
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(counts[t] / static_cast<double>(n), p[t], 0.01) << "token " << t;
}

TEST(Sampler, RepetitionPenalty) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f, -0.5f};
  apply_repetition_penalty(l, {0, 1, 1, 4, 5}, 2.0f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);   // positive: divided
  EXPECT_FLOAT_EQ(l[1], -4.0f);  // negative: multiplied, once however often it occurs
  EXPECT_FLOAT_EQ(l[2], 1.0f);   // not in the history
  EXPECT_FLOAT_EQ(l[3], 0.5f);
  EXPECT_FLOAT_EQ(l[4], 0.0f);
  EXPECT_FLOAT_EQ(l[5], -1.0f);
  std::vector<float> same = {2.0f, -2.0f};
  apply_repetition_penalty(same, {0, 1}, 1.0f);
  EXPECT_EQ(same, (std::vector<float>{2.0f, -2.0f}));

  // Through the sampler: a greedy pick that is in the history loses to the runner-up.
  SamplerSettings s;
  s.greedy = true;
  s.repetition_penalty = 1.5f;
  Sampler sm(s);
  EXPECT_EQ(sm.sample({3.0f, 2.5f, 1.0f}, {0}).token, 1);
  EXPECT_EQ(sm.sample({3.0f, 2.5f, 1.0f}, {2}).token, 0);
  // Negative logits move further down.
  EXPECT_EQ(sm.sample({-1.0f, -1.2f}, {0}).token, 1);
}

TEST(Sampler, SameSeedSameTokens) {
  const auto l = random_logits(300, 21, 1.0f);
  SamplerSettings s;
  s.greedy = false;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.9f;
  s.seed = 1234;
  auto draw_seq = [&](Sampler& sm) {
    std::vector<int> t;
    for (int i = 0; i < 50; ++i) t.push_back(sm.sample(l, {}).token);
    return t;
  };
  Sampler a(s), b(s);
  const auto ta = draw_seq(a);
  EXPECT_EQ(draw_seq(b), ta);
  // set_settings reseeds: the sequence starts over.
  a.set_settings(s);
  EXPECT_EQ(draw_seq(a), ta);
  SamplerSettings other = s;
  other.seed = 4321;
  Sampler c(other);
  EXPECT_NE(draw_seq(c), ta);
  EXPECT_EQ(a.settings().seed, 1234u);
}

TEST(Sampler, ReportsProbabilitiesOfTheFullDistribution) {
  // `prob` and `top` come from the distribution the token was drawn from,
  // before the top-k / top-p cuts.
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
  SamplerSettings s;
  s.greedy = false;
  s.top_k = 2;
  s.seed = 8;
  Sampler sm(s);
  const auto p = softmax(l);
  for (int i = 0; i < 20; ++i) {
    const SampleResult r = sm.sample(l, {}, 4);
    ASSERT_EQ(r.top.size(), 4u);
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(r.top[j].prob, p[j], 1e-6);
    EXPECT_NEAR(r.prob, p[r.token], 1e-6);
    EXPECT_LT(r.token, 2);
  }
}

}  // namespace
}  // namespace kvscope
