// The decode products of kvscope-tiny's shapes (4 layers x {480x160, 160x160,
// 640x160, 160x640} + the 4257x160 head, random f16 weights), each kernel
// path timed alone: best of 400 single passes (the machine's other load falls
// on the slower passes). One position, or N with an argument N. The native
// build is part of the normal one (build/kvscope_kernel_bench [N]); the
// WebAssembly one is by hand from the repository root (docs/web.md), with
// E = "-std=c++17 -I. -I/usr/include/eigen3 tools/web/kernel_bench.cpp" and
// S = "model/engine/linear_kernels.cpp model/engine/linear_simd128.cpp
//      model/core/numeric.cpp model/arch/weight_matrix.cpp":
//   NODE_PATH=/usr/share/nodejs em++ -O3 -DNDEBUG -msimd128 -sALLOW_MEMORY_GROWTH=1 -sEXIT_RUNTIME=1
//       $E $S -o /tmp/kb/kb.js && node tools/web/run_in_chromium.mjs /tmp/kb/kb.js [N]
// (Chromium's V8, as the page; `node /tmp/kb/kb.js` runs it on node's, which
// is older and up to 1.6x slower on these loops.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "model/arch/weight_matrix.h"
#include "model/core/numeric.h"
#include "model/engine/kernels.h"
#include "model/engine/linear_kernels.h"

using namespace kvscope;

namespace {

struct Mat {
  int rows, cols;
  std::vector<uint16_t> h;  // (rows, cols) f16
  std::vector<float> f;     // the same values as f32
  WeightMatrix ph, pf;      // the same as panels (f16, f32), as the loaders keep them
};

double best_ms(const std::function<void()>& pass) {
  double best = 1e9;
  for (int round = 0; round < 400; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;  // positions at once (decode: 1)
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 0.05f);
  std::vector<Mat> ms;
  for (int l = 0; l < 4; ++l)
    for (auto [r, c] : {std::pair{480, 160}, {160, 160}, {640, 160}, {160, 640}}) ms.push_back({r, c, {}, {}, {}, {}});
  ms.push_back({4257, 160, {}, {}, {}, {}});
  double macs = 0;
  for (Mat& m : ms) {
    m.h.resize(static_cast<size_t>(m.rows) * m.cols);
    m.f.resize(m.h.size());
    for (size_t i = 0; i < m.h.size(); ++i) m.f[i] = f16_to_f32(m.h[i] = f32_to_f16(nd(rng)));
    m.ph = WeightMatrix::from_f32(m.f.data(), m.rows, m.cols, StoredType::kF16);
    m.pf = WeightMatrix::from_f32(m.f.data(), m.rows, m.cols, StoredType::kF32);
    m.ph.to_panels();
    m.pf.to_panels();
    macs += static_cast<double>(m.rows) * m.cols;
  }
  std::vector<float> x(640 * n), y(4257 * n), b(4257, 0.0f);
  for (float& v : x) v = nd(rng);
  auto report = [&](const char* name, double ms_) {
    std::printf("%-26s %.3f ms a step's products (%d positions), %.2f G multiply-adds/s\n", name, ms_, n,
                n * macs / ms_ / 1e6);
  };
  using Rows =
      void (*)(const WeightView&, const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t, int64_t);
  auto rows = [&](Rows fn, bool f32) {
    return best_ms([&] {
      for (const Mat& m : ms) {
        const WeightView v{f32 ? StoredType::kF32 : StoredType::kF16,
                           f32 ? static_cast<const void*>(m.f.data()) : static_cast<const void*>(m.h.data()), m.rows,
                           m.cols};
        fn(v, x.data(), n, 640, b.data(), y.data(), 4257, 0, m.rows);
      }
    });
  };
  auto panels = [&](bool f32) {
    return best_ms([&] {
      for (const Mat& m : ms) {
        const WeightMatrix& w = f32 ? m.pf : m.ph;
        const WeightView v{w.type, w.data(), w.rows, w.cols, 0, w.panels};
        linear_rows(v, x.data(), n, 640, b.data(), y.data(), 4257, 0, m.rows);
      }
    });
  };
  report("portable (generic) f16", rows(linear_detail::rows_generic, false));
  report("portable (generic) f32", rows(linear_detail::rows_generic, true));
  if (kPanelWeights) {  // what the products run: AVX-512 natively, SIMD128 in the page
    report("panels f16", panels(false));
    report("panels f32", panels(true));  // the page's f32 copy of a small model
    // The last matrix (the head) both ways: the same sums in another order.
    const Mat& m = ms.back();
    std::vector<float> ref(y.size());
    linear_detail::rows_generic({StoredType::kF32, m.f.data(), m.rows, m.cols}, x.data(), n, 640, b.data(), ref.data(),
                                4257, 0, m.rows);
    panels(false);
    double diff = 0;
    for (int p = 0; p < n; ++p)
      for (int r = 0; r < m.rows; ++r) diff = std::max(diff, std::abs(double(ref[p * 4257 + r]) - y[p * 4257 + r]));
    std::printf("panels f16 vs portable f32, the head: largest difference %.3g\n", diff);
  }
#ifndef __wasm_simd128__
  if (n > 1) return 0;
  report("native matvec_f16 (decode)", best_ms([&] {
           for (const Mat& m : ms) matvec_f16(m.h.data(), m.cols, x.data(), b.data(), y.data(), 0, m.rows);
         }));
  report("native matvec_f32", best_ms([&] {
           for (const Mat& m : ms) matvec_f32(m.f.data(), m.cols, x.data(), b.data(), y.data(), 0, m.rows);
         }));
#endif
  return 0;
}
