// The CPU's multiply-add ceilings that the linear kernels (linear_kernels.h)
// run against, measured on one core: a forward over n positions costs about
// one decode step only while its products take less time than reading the
// weights, and these rates say when that stops (`kvscope bench --kernels`,
// docs/batching.md).
#pragma once

#include <algorithm>
#include <chrono>

namespace kvscope {

// `work` (multiply-adds, bytes, ...) over the fastest of `reps` (at least 1)
// timed runs of `run`, per second: the least disturbed run on a shared machine.
template <class Run>
double best_rate(int reps, double work, const Run& run) {
  double best_s = 1e30;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return work / best_s;
}

// Single-thread multiply-adds a second, the best of `reps` runs of a loop over
// independent accumulators: the f32 FMA (16 lanes an instruction, AVX-512) and
// AVX512_BF16's dot product (32 an instruction). 0 where the build has no
// such instruction (WebAssembly, builds without AVX-512).
double fma_peak_macs_per_s(int reps);
double bf16_dot_peak_macs_per_s(int reps);

}  // namespace kvscope
