// Rows r0..r1 of Y = X W^T + b with W (rows, cols) held as GGUF quantized
// blocks (weight_matrix.h: each row cols / block_size blocks, rows back to
// back), read straight from the blocks: the matrix is never expanded.
//
// The activations stay f32: each weight is decoded to f32 (d * q, d * q + m,
// d s q - dmin m, as gguf_types.h's dequantize_row; a compiler may fuse a
// decode's multiply-add, in either) and multiplied with the f32 inputs, so a
// product equals NumPy's dequantize-then-matmul up to f32 summation (~1e-6
// relative). Every block is read from memory once per call:
//  - n <= kQuantDirectN (decode and short forwards): per row, each run of 32
//    weights decoded into registers (AVX2+FMA where built, every type, with
//    16-lane sums where AVX-512 is; elsewhere a portable loop over a
//    256-float scratch) and multiply-added into accumulators per position.
//    Several positions go in groups of up to 8 (4 for Q4_K, Q5_K) and, per
//    block of 32 rows, in column chunks of 512 that keep their inputs in L1;
//    a row is decoded once per group.
//  - larger n: kLinearRowBlock rows at a time decoded into a thread_local
//    f32 scratch (32 x cols floats, never the whole matrix) and multiplied
//    by the f32 row kernels (linear_kernels.h), GEMM included.
// Results do not depend on how [r0, r1) is split among threads.
#pragma once

#include <cstdint>

#include "model/arch/gguf_types.h"

namespace kvscope {

struct QuantView {
  GgmlType type = GgmlType::kQ8_0;
  const uint8_t* blocks = nullptr;  // rows x row_bytes
  int64_t rows = 0, cols = 0;       // cols a multiple of the block size
  int64_t row_bytes = 0;            // cols / block_size * block_bytes
};

// Y[i * ldy + r] = sum_k X[i * ldx + k] * W[r, k] (+ b[r] if b), i < n, r in [r0, r1).
void quant_rows(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                int64_t r0, int64_t r1);

// Largest n the direct (register) kernels take.
constexpr int64_t kQuantDirectN = 8;

namespace linear_detail {
// The direct paths, for tests and benchmarks (n <= kQuantDirectN): the
// portable one (the reference and the fallback) and, where the build has
// AVX2 and FMA, the vector one (kQuantAvx2 says whether it exists; without
// it quant_rows_avx2 is the portable one).
void quant_rows_portable(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y,
                         int64_t ldy, int64_t r0, int64_t r1);
void quant_rows_avx2(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                     int64_t r0, int64_t r1);
// A row of `cols` weights decoded to f32 (the AVX2 decoders where built,
// else dequantize_row).
void quant_decode_row(GgmlType type, const uint8_t* row, int64_t cols, float* out);
#if defined(__AVX2__) && defined(__FMA__)
constexpr bool kQuantAvx2 = true;
#else
constexpr bool kQuantAvx2 = false;
#endif
}  // namespace linear_detail

}  // namespace kvscope
