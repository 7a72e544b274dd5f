// The CPU's multiply-add ceilings that the linear kernels (linear_kernels.h)
// run against, measured on one core: a forward over n positions costs about
// one decode step only while its products take less time than reading the
// weights, and these rates say when that stops (`kvscope bench --kernels`,
// docs/batching.md).
#pragma once

namespace kvscope {

// Single-thread multiply-adds a second, the best of `reps` runs of a loop over
// independent accumulators: the f32 FMA (16 lanes an instruction, AVX-512) and
// AVX512_BF16's dot product (32 an instruction). 0 where the build has no
// such instruction (WebAssembly, builds without AVX-512).
double fma_peak_macs_per_s(int reps);
double bf16_dot_peak_macs_per_s(int reps);

}  // namespace kvscope
