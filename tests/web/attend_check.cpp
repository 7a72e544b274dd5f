// The page's attention over an f32 cache (kernels_attend.cpp: SIMD128, four
// keys a pass, for head widths of whole 8-value chunks) against a
// double-precision softmax(q k / sqrt(d)) v, and bit for bit against the
// portable path the page takes for rows that do not lie on a float's
// alignment: every cache layout must give the same weights. Head widths
// 8-128 and two the vector path leaves to the scalar one (12, 72); one run of
// keys and pages of 3; 1-100 keys; a slice of a row holding several heads.
// Also the sampler's softmax (sampler.cpp, its exp exp_simd128.h) against a
// double-precision one. Run with linear_check (same executable,
// tests/web/web_test.mjs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "model/decoding/sampler.h"
#include "model/engine/kernels.h"
#include "tests/web/web_checks.h"

namespace kvscope::web_checks {
namespace {

struct Case {
  int hd, len, block, heads;
};

// Runs of `block` keys (a paged cache) over rows of `row_bytes` from k and v.
std::vector<KVRowRun> runs_over(const uint8_t* k, const uint8_t* v, size_t row_bytes, int len, int block) {
  std::vector<KVRowRun> runs;
  for (int at = 0; at < len; at += block) {
    const int n = std::min(block, len - at);
    runs.push_back({k + static_cast<size_t>(at) * row_bytes, v + static_cast<size_t>(at) * row_bytes, n});
  }
  return runs;
}

void one_case(const Case& c, std::mt19937& rng, Tally& t) {
  const int width = c.hd * c.heads, col = c.hd * (c.heads - 1);  // the last head's slice
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> K(static_cast<size_t>(c.len * width)), V(K.size()), q(static_cast<size_t>(c.hd));
  for (float& x : K) x = nd(rng);
  for (float& x : V) x = nd(rng);
  for (float& x : q) x = 2.0f * nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  // The same rows 2 bytes past a float's alignment: the portable path.
  std::vector<uint8_t> bytes(2 * K.size() * sizeof(float) + 8);
  uint8_t* k2 = bytes.data() + 2;
  uint8_t* v2 = k2 + K.size() * sizeof(float);
  std::memcpy(k2, K.data(), K.size() * sizeof(float));
  std::memcpy(v2, V.data(), V.size() * sizeof(float));

  const auto attend = [&](const uint8_t* k, const uint8_t* v, std::vector<float>& p, std::vector<float>& out) {
    const std::vector<KVRowRun> runs = runs_over(k, v, row_bytes, c.len, c.block);
    p.assign(static_cast<size_t>(c.len), -7.0f);
    out.assign(static_cast<size_t>(c.hd), -7.0f);
    attend_runs(q.data(), KVRunsView{KVDtype::kF32, runs.data(), static_cast<int>(runs.size()), row_bytes, col}, c.hd,
                c.len, scale, p.data(), out.data());
  };
  std::vector<float> p, out, p2, out2;
  attend(reinterpret_cast<const uint8_t*>(K.data()), reinterpret_cast<const uint8_t*>(V.data()), p, out);
  attend(k2, v2, p2, out2);

  std::vector<double> w(static_cast<size_t>(c.len));
  double mx = -1e300, sum = 0;
  for (int j = 0; j < c.len; ++j) {
    double d = 0;
    for (int i = 0; i < c.hd; ++i) d += static_cast<double>(K[static_cast<size_t>(j * width + col + i)]) * q[i];
    w[j] = d * scale;
    mx = std::max(mx, w[j]);
  }
  for (double& x : w) sum += (x = std::exp(x - mx));
  double worst = 0;
  for (int i = 0; i < c.hd; ++i) {
    double ref = 0, mag = 0;
    for (int j = 0; j < c.len; ++j) {
      const double vv = V[static_cast<size_t>(j * width + col + i)];
      ref += w[j] / sum * vv;
      mag += std::fabs(w[j] / sum * vv);
    }
    worst = std::max(worst, std::fabs(out[i] - ref) / (mag + 1e-30));
  }
  for (int j = 0; j < c.len; ++j) worst = std::max(worst, std::fabs(p[j] - w[j] / sum));
  // Bit for bit (== would let -0 equal +0 and fail any NaN).
  const auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  const bool same = bits_equal(p, p2) && bits_equal(out, out2);
  t.add(worst <= 1e-5 && same, worst);
  if (worst > 1e-5 || !same)
    std::printf("attend_check FAILED: hd %d, %d keys, pages of %d, %d heads: error %.3g, %s the portable path\n", c.hd,
                c.len, c.block, c.heads, worst, same ? "same as" : "differs from");
}

}  // namespace

Tally attend_check(std::mt19937& rng) {
  Tally t;
  for (int hd : {8, 12, 16, 24, 32, 40, 48, 64, 72, 128})
    for (int len : {1, 2, 3, 4, 5, 7, 8, 9, 33, 100})
      for (int block : {3, 1 << 20})
        for (int heads : {1, 3}) one_case({hd, len, block, heads}, rng, t);
  return t;
}

Tally softmax_check(std::mt19937& rng) {
  Tally t;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n : {1, 3, 15, 16, 17, 33, 4257, 50257})
    for (float temperature : {1.0f, 0.7f, 1.3f})
      for (float spread : {1.0f, 30.0f}) {  // 30: most values far below the largest (exps that flush to 0)
        std::vector<float> logits(static_cast<size_t>(n));
        for (float& x : logits) x = spread * nd(rng);
        const std::vector<float> p = softmax(logits, temperature);
        double mx = -1e300, sum = 0;
        for (float x : logits) mx = std::max(mx, static_cast<double>(x));
        std::vector<double> ref(logits.size());
        // x - max and / T in float as the softmax computes them (their rounding is the softmax's
        // definition, not the page's error); the exp, sum and scale in double.
        for (size_t i = 0; i < ref.size(); ++i)
          sum += (ref[i] = std::exp(static_cast<double>((logits[i] - static_cast<float>(mx)) / temperature)));
        double worst = 0;
        bool ok = p.size() == ref.size();
        for (size_t i = 0; ok && i < ref.size(); ++i) {
          ref[i] /= sum;
          // Below the smallest normal float the exp is 0 in every build.
          if (ref[i] < 1e-36) {
            ok = p[i] >= 0 && p[i] < 1e-36;
            continue;
          }
          worst = std::max(worst, std::fabs(p[i] - ref[i]) / ref[i]);
        }
        ok = ok && worst <= 1e-6;
        t.add(ok, worst);
        if (!ok)
          std::printf("softmax_check FAILED: %d logits, T %.1f, spread %.0f: error %.3g\n", n, temperature, spread,
                      worst);
      }
  return t;
}

}  // namespace kvscope::web_checks
