#include "model/decoding/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "model/core/error.h"

namespace kvscope {

void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& history, float penalty) {
  if (penalty == 1.0f) return;
  // Each distinct token once, however often it occurred (as in CTRL / HF).
  std::unordered_set<int> seen(history.begin(), history.end());
  for (int t : seen) {
    if (t < 0 || t >= static_cast<int>(logits.size())) continue;
    float& x = logits[static_cast<size_t>(t)];
    x = x > 0 ? x / penalty : x * penalty;
  }
}

std::vector<float> softmax(const std::vector<float>& logits, float temperature) {
  std::vector<float> p(logits.size());
  if (logits.empty()) return p;
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((logits[i] - mx) / temperature);
    sum += p[i];
  }
  for (float& x : p) x = static_cast<float>(x / sum);
  return p;
}

std::vector<int> kept_indices(const std::vector<float>& probs, int top_k, float top_p) {
  std::vector<int> idx(probs.size());
  std::iota(idx.begin(), idx.end(), 0);
  // Ties keep the lower id first, so the order (and the draw) is deterministic.
  auto better = [&](int a, int b) {
    return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)] ||
           (probs[static_cast<size_t>(a)] == probs[static_cast<size_t>(b)] && a < b);
  };
  size_t keep = idx.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < keep) keep = static_cast<size_t>(top_k);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), better);
  idx.resize(keep);
  if (top_p < 1.0f) {
    // Smallest prefix whose mass reaches top_p (renormalised over what top-k kept).
    double total = 0;
    for (int i : idx) total += probs[static_cast<size_t>(i)];
    double cum = 0;
    size_t n = 0;
    while (n < idx.size()) {
      cum += probs[static_cast<size_t>(idx[n])] / total;
      ++n;
      if (cum >= top_p) break;
    }
    idx.resize(std::max<size_t>(n, 1));
  }
  return idx;
}

double uniform_draw(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

SampleTrace sample_trace(const std::vector<float>& logits_in, const std::vector<int>& history, const SamplerSettings& s,
                         double u) {
  SampleTrace t;
  t.logits = logits_in;
  apply_repetition_penalty(t.logits, history, s.repetition_penalty);
  t.probs = softmax(t.logits, s.greedy ? 1.0f : s.temperature);
  if (s.greedy) {
    t.kept = kept_indices(t.probs, 1, 1.0f);  // the argmax (ties: the lower id)
    t.kept_mass = t.probs[static_cast<size_t>(t.kept[0])];
    t.cum_hi = {1.0};
    t.token = t.kept[0];
    return t;
  }
  t.kept = kept_indices(t.probs, s.top_k, s.top_p);
  // Mass in kept order in double, then a running sum of p / mass; the draw
  // picks the first token whose running sum exceeds it (the last one when
  // rounding leaves u at or above every sum).
  for (int i : t.kept) t.kept_mass += t.probs[static_cast<size_t>(i)];
  double cum = 0;
  for (int i : t.kept) {
    cum += t.probs[static_cast<size_t>(i)] / t.kept_mass;
    t.cum_hi.push_back(cum);
  }
  t.draw = u;
  t.draw_bar = static_cast<int>(t.kept.size()) - 1;
  for (size_t j = 0; j < t.cum_hi.size(); ++j)
    if (u < t.cum_hi[j]) {
      t.draw_bar = static_cast<int>(j);
      break;
    }
  t.token = t.kept[static_cast<size_t>(t.draw_bar)];
  return t;
}

Sampler::Sampler(const SamplerSettings& s) {
  set_settings(s);
}

void Sampler::set_settings(const SamplerSettings& s) {
  if (!s.greedy && !(s.temperature > 0)) throw Error("sampler: temperature must be > 0 (use greedy for 0)");
  if (!(s.top_p > 0 && s.top_p <= 1)) throw Error("sampler: top_p must be in (0, 1]");
  if (s.top_k < 0) throw Error("sampler: top_k must be >= 0 (0 = off)");
  if (!(s.repetition_penalty > 0)) throw Error("sampler: repetition_penalty must be > 0");
  s_ = s;
  rng_.seed(s.seed);
}

SampleResult Sampler::sample(const std::vector<float>& logits_in, const std::vector<int>& history, int n_top) {
  // Every step's logits pass here: a NaN or infinity (from weights or an
  // overflow in the forward) stops the generation instead of turning every
  // probability into NaN.
  for (size_t i = 0; i < logits_in.size(); ++i) {
    if (!std::isfinite(logits_in[i])) {
      throw Error(std::string("the model computed a non-finite logit (") + (std::isnan(logits_in[i]) ? "NaN" : "inf") +
                  " for token id " + std::to_string(i) +
                  "); generation stopped (expected finite logits: check the weights)");
    }
  }
  const SampleTrace t = sample_trace(logits_in, history, s_, s_.greedy ? -1.0 : uniform_draw(rng_));
  const std::vector<float>& probs = t.probs;
  SampleResult r;
  const std::vector<int> order = kept_indices(probs, std::min<int>(n_top, static_cast<int>(probs.size())), 1.0f);
  for (int i : order) r.top.push_back({i, probs[static_cast<size_t>(i)]});
  r.token = t.token;
  r.draw = static_cast<float>(t.draw);
  r.prob = probs[static_cast<size_t>(r.token)];
  return r;
}

}  // namespace kvscope
