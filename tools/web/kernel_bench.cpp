// The decode products of kvscope-tiny's shapes (4 layers x {480x160, 160x160,
// 640x160, 160x640} + the 4257x160 head, random f16 weights), each kernel
// path timed alone: best of 400 single passes (the machine's other load falls
// on the slower passes). One position, or N with an argument N. The native
// build is part of the normal one (build/kvscope_kernel_bench [N]); the
// WebAssembly one is by hand from the repository root (docs/web.md), with
// E = "-std=c++17 -I. -I/usr/include/eigen3 tools/web/kernel_bench.cpp" and
// S = "model/engine/linear_kernels.cpp model/core/numeric.cpp":
//   NODE_PATH=/usr/share/nodejs em++ -O3 -DNDEBUG -msimd128 -sALLOW_MEMORY_GROWTH=1 $E $S
//       model/engine/linear_simd128.cpp -o /tmp/kb.js && node --no-experimental-fetch /tmp/kb.js [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "model/core/numeric.h"
#include "model/engine/kernels.h"
#include "model/engine/linear_kernels.h"

using namespace kvscope;

namespace {

struct Mat {
  int rows, cols;
  std::vector<uint16_t> h;  // (rows, cols) f16
  std::vector<float> f;     // the same values as f32
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
    for (auto [r, c] : {std::pair{480, 160}, {160, 160}, {640, 160}, {160, 640}}) ms.push_back({r, c, {}, {}});
  ms.push_back({4257, 160, {}, {}});
  double macs = 0;
  for (Mat& m : ms) {
    m.h.resize(static_cast<size_t>(m.rows) * m.cols);
    m.f.resize(m.h.size());
    for (size_t i = 0; i < m.h.size(); ++i) m.f[i] = f16_to_f32(m.h[i] = f32_to_f16(nd(rng)));
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
  report("portable (generic) f16", rows(linear_detail::rows_generic, false));
  report("portable (generic) f32", rows(linear_detail::rows_generic, true));
#ifdef __wasm_simd128__
  report("simd128 f16", rows(linear_detail::rows_simd128, false));
  report("simd128 f32", rows(linear_detail::rows_simd128, true));
#else
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
