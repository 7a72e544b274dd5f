// The page's products (linear_simd128.cpp: 16-row panels, SIMD128) against a
// double-precision loop over the same stored weights, as the native kernel
// tests check the AVX-512 panels (tests/test_kernels.cpp): F32, F16, BF16 and
// the page's f32 copies; partial last panels, odd widths, chunks of columns
// past kPanelKc, 1-17 positions, shares split on panel boundaries; an F16
// inf and NaN in a later chunk, which the exact fallback must carry.
// `make web` builds it, with the attention's check (attend_check.cpp);
// tests/web/web_test.mjs runs it under node
// (`node build-web/kvscope_linear_check.js`; exit 0 when every case holds).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "model/arch/weight_matrix.h"
#include "model/core/numeric.h"
#include "model/engine/linear_kernels.h"
#include "tests/web/web_checks.h"

using namespace kvscope;

namespace {

int g_cases = 0, g_failed = 0;
double g_worst = 0;

// Y (n, ldy) from linear_rows over shares of whole panels, against sum_k
// W[r, k] X[p, k] + b[r] in double, relative to sum |W X| + |b|.
void check(const WeightMatrix& w, bool wide, int n, std::mt19937& rng, const char* what) {
  const int64_t rows = w.rows, cols = w.cols, ldx = cols + 3, ldy = rows + 2;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> X(static_cast<size_t>(n * ldx)), b(static_cast<size_t>(rows)),
      Y(static_cast<size_t>(n * ldy), -7.0f);
  for (float& v : X) v = nd(rng);
  for (float& v : b) v = nd(rng);
  const WeightView view = wide ? WeightView{StoredType::kF32, w.wide.data(), rows, cols, 0, w.panels}
                               : WeightView{w.type, w.data(), rows, cols, 0, w.panels};
  // Two shares, the first ending on a panel boundary, as threads split.
  const int64_t mid = rows > kPanelRows ? kPanelRows : rows;
  linear_rows(view, X.data(), n, ldx, b.data(), Y.data(), ldy, 0, mid);
  linear_rows(view, X.data(), n, ldx, b.data(), Y.data(), ldy, mid, rows);
  ++g_cases;
  for (int p = 0; p < n; ++p)
    for (int64_t r = 0; r < rows; ++r) {
      double s = b[static_cast<size_t>(r)], mag = std::fabs(s);
      for (int64_t k = 0; k < cols; ++k) {
        const double t = static_cast<double>(w.at(r, k)) * X[static_cast<size_t>(p * ldx + k)];
        s += t;
        mag += std::fabs(t);
      }
      const float y = Y[static_cast<size_t>(p * ldy + r)];
      bool ok;
      if (!std::isfinite(s)) {
        ok = std::isnan(s) ? std::isnan(y) : y == static_cast<float>(s);
      } else {
        const double rel = std::fabs(y - s) / (mag + 1e-30);
        g_worst = std::max(g_worst, rel);
        ok = rel <= 2e-6;
      }
      if (!ok) {
        if (++g_failed <= 10)
          std::printf("FAIL %s %s rows %lld cols %lld n %d: y[%d, %lld] = %.9g, expected %.9g\n", what,
                      wide ? "(f32 copy)" : "", static_cast<long long>(rows), static_cast<long long>(cols), n, p,
                      static_cast<long long>(r), y, s);
        return;
      }
    }
}

WeightMatrix random_matrix(int64_t rows, int64_t cols, StoredType type, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = nd(rng);
  WeightMatrix w = WeightMatrix::from_f32(v.data(), rows, cols, type);
  w.to_panels();
  return w;
}

}  // namespace

int main() {
  std::mt19937 rng(7);
  const char* names[] = {"F32", "F16", "BF16"};
  for (int t = 0; t < 3; ++t) {
    const StoredType type = t == 0 ? StoredType::kF32 : t == 1 ? StoredType::kF16 : StoredType::kBF16;
    for (int64_t rows : {1, 15, 16, 17, 33, 50})
      for (int64_t cols : {1, 7, 160, 257, 600})
        for (int n : {1, 2, 3, 5, 8, 9, 17}) {
          WeightMatrix w = random_matrix(rows, cols, type, rng);
          check(w, false, n, rng, names[t]);
          if (type != StoredType::kF32) {
            w.widen();
            check(w, true, n, rng, names[t]);
          }
        }
  }
  // An F16 inf and a NaN in the second 256-column chunk of the first panel.
  for (int n : {1, 2, 5}) {
    WeightMatrix w = random_matrix(40, 600, StoredType::kF16, rng);
    w.half[panel_index(3, 300, 40, 600)] = 0x7c00;  // +inf
    w.half[panel_index(9, 511, 40, 600)] = 0x7e00;  // NaN
    check(w, false, n, rng, "F16 with inf and NaN");
  }
  std::printf("linear_check: %d cases on %lld-row panels, %d failed, largest relative error %.3g\n", g_cases,
              static_cast<long long>(kPanelRows), g_failed, g_worst);
  const web_checks::Tally a = web_checks::attend_check(rng);
  std::printf("attend_check: %d cases (f32 cache, SIMD128 and portable paths), %d failed, largest error %.3g\n",
              a.cases, a.failed, a.worst);
  const web_checks::Tally sm = web_checks::softmax_check(rng);
  std::printf("softmax_check: %d cases (the sampler's softmax, SIMD128 exp), %d failed, largest relative error %.3g\n",
              sm.cases, sm.failed, sm.worst);
  return g_failed || a.failed || sm.failed ? 1 : 0;
}
