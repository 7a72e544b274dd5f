#include "model/decoding/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include <Eigen/Core>

#include "model/core/error.h"
#include "model/core/exp_simd128.h"

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

std::vector<double> log_softmax(const float* logits, size_t n) {
  std::vector<double> out(n);
  if (n == 0) return out;
  const auto x = Eigen::Map<const Eigen::ArrayXf>(logits, static_cast<Eigen::Index>(n));
  const double mx = x.maxCoeff();
  // An aligned temporary, so the packet exp covers the same indices wherever
  // the logits lie (a log probability must not depend on an address); in
  // double, Eigen's packet exp halves std::exp's time over 50 257 logits.
  const Eigen::ArrayXd shifted = x.cast<double>() - mx;
  const double lse = mx + std::log(shifted.exp().sum());
  Eigen::Map<Eigen::ArrayXd>(out.data(), static_cast<Eigen::Index>(n)) = x.cast<double>() - lse;
  return out;
}

std::vector<float> softmax(const std::vector<float>& logits, float temperature) {
  // Vectorised (Eigen's packet exp is within 2 ulp of std::exp for normal
  // results): over GPT-2's 50 257 logits a scalar std::exp loop took 0.2 ms
  // a token, 2 % of a 124M decode step but paid once per request in a batch
  // (8 requests: 1.6 ms of a step of about 20 ms).
  const int n = static_cast<int>(logits.size());
  std::vector<float> p(logits.size());
  if (n == 0) return p;
  const float mx = Eigen::Map<const Eigen::ArrayXf>(logits.data(), n).maxCoeff();
  // Sixteen at a time through an aligned chunk of whole packets (the last one
  // padded), so every value takes the packet exp: on an unaligned vector
  // Eigen would peel a scalar head and tail (std::exp), and a value's
  // probability would depend on where the logits lie in memory.
  constexpr int kChunk = 16;
  alignas(64) float chunk[kChunk];
  Eigen::Map<Eigen::Array<float, kChunk, 1>, Eigen::Aligned64> e(chunk);
  // The sum in double, in independent running sums (one chain of dependent
  // adds was a fifth of the time).
  double part[kChunk] = {};
  auto keep = [&](int i, int m) {
    // Below the smallest normal float the exps differ by build (Eigen's
    // AVX-512 packet gives 0, its SSE/AVX2 packet a constant, expf a
    // subnormal): 0 in every build, so the page and the desktop agree.
    for (float& x : chunk) x = x < std::numeric_limits<float>::min() ? 0.0f : x;
    for (int j = 0; j < m; ++j) {
      p[static_cast<size_t>(i + j)] = chunk[j];
      part[j] += chunk[j];
    }
  };
  int i = 0;
  // In WebAssembly Eigen has no packets (its exp is expf, a value at a
  // time): exp_simd128.h there.
  auto exp_chunk = [&] {
#ifdef __wasm_simd128__
    exp_in_place_simd128(chunk, kChunk);
#else
    e = e.exp();
#endif
  };
  for (; i + kChunk <= n; i += kChunk) {
    e = (Eigen::Map<const Eigen::Array<float, kChunk, 1>>(logits.data() + i) - mx) / temperature;
    exp_chunk();
    keep(i, kChunk);
  }
  const int m = n - i;
  for (int j = 0; j < kChunk; ++j)
    chunk[j] =
        j < m ? (logits[static_cast<size_t>(i + j)] - mx) / temperature : -std::numeric_limits<float>::infinity();
  exp_chunk();
  keep(i, m);
  double sum = 0;
  for (double x : part) sum += x;
  Eigen::Map<Eigen::ArrayXf>(p.data(), n) *= static_cast<float>(1.0 / sum);
  return p;
}

namespace {

// Ties keep the lower id first, so the order (and the draw) is deterministic.
struct Better {
  const std::vector<float>& probs;
  bool operator()(int a, int b) const {
    const float pa = probs[static_cast<size_t>(a)], pb = probs[static_cast<size_t>(b)];
    return pa > pb || (pa == pb && a < b);
  }
};

// Probabilities are >= 0, whose IEEE bit patterns without the sign bit (a
// -0 has it) order as unsigned integers do: an integer maximum, which
// compilers vectorise (a float one they may not reorder), finds a chunk's
// largest.
uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b & 0x7fffffffu;
}

template <int kChunk>
uint32_t chunk_max_bits(const float* p) {
  uint32_t m = 0;
  for (int j = 0; j < kChunk; ++j) m = std::max(m, float_bits(p[j]));
  return m;
}

// The k best ids, best first, in one pass holding the k best so far in a heap
// (worst at its front): the same ids and order as sorting every id, without
// building and sorting an index over the whole vocabulary each token. Once k
// are held, a chunk whose largest value does not beat the worst one held is
// skipped whole (an equal value loses the tie: its id is larger).
std::vector<int> best_k(const std::vector<float>& probs, size_t k, Better better) {
  constexpr int kChunk = 16;
  std::vector<int> heap;
  heap.reserve(k);
  // Takes id i, which beats the worst held (or the heap is not full yet).
  auto take = [&](int i) {
    if (heap.size() == k) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.pop_back();
    }
    heap.push_back(i);
    std::push_heap(heap.begin(), heap.end(), better);
  };
  // Most ids lose to the worst held: tested here, so only the few taken
  // reach a call (in WebAssembly each such call from here passes through a
  // JavaScript exception trampoline).
  auto wins = [&](int i) { return heap.size() < k || better(i, heap.front()); };
  const int n = static_cast<int>(probs.size());
  int i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    if (heap.size() == k &&
        chunk_max_bits<kChunk>(probs.data() + i) <= float_bits(probs[static_cast<size_t>(heap.front())]))
      continue;
    for (int j = i; j < i + kChunk; ++j)
      if (wins(j)) take(j);
  }
  for (; i < n; ++i)
    if (wins(i)) take(i);
  std::sort_heap(heap.begin(), heap.end(), better);
  return heap;
}

}  // namespace

std::vector<int> kept_indices(const std::vector<float>& probs, int top_k, float top_p) {
  const Better better{probs};
  size_t keep = probs.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < keep) keep = static_cast<size_t>(top_k);
  std::vector<int> idx;
  if (keep * 16 <= probs.size()) {
    idx = best_k(probs, keep, better);
  } else {
    idx.resize(probs.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), better);
    idx.resize(keep);
  }
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
