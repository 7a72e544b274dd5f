// Rows r0..r1 of Y = X W^T + b for n rows of X, with W (rows, cols) in its
// stored dtype (F32, F16 = IEEE binary16, BF16 = upper half of an f32),
// row-major or as panels of 32 rows (weight_matrix.h).
//
// Every weight is read from memory once per call, whatever n is. Panels (what
// the loaders store where AVX-512 is built) take every n, decode included:
// per column, the 32 rows' weights are loaded and converted once and
// multiplied by each position's broadcast input (groups of up to 8 positions
// over an L1-resident chunk of 256 columns), with a software prefetch that
// keeps the weights streaming while a batch's multiply-adds run: on
// GPT-2-124M F16 shapes, 5 positions cost about 1.2 decode steps and 8 about
// 1.6 (1.9 and 2.9 on the row-major paths below).
// Row-major weights (tests; builds without AVX-512, the page included):
//  - n <= kRowStreamMaxN: one W row at a time (a single sequential stream,
//    like decode's matvec in kernels.h, which the engine uses for n == 1),
//    each 16-column chunk converted once and FMA'd into n accumulators, all
//    n in one pass (the 4-row blocks below take 5-6 positions as a 4-tile
//    and a 1-tile, converting every chunk twice);
//  - kRowStreamMaxN < n <= kDirectMaxN: blocks of 4 W rows are converted to f32 in
//    registers, 16 columns at a time, and each converted chunk is FMA'd
//    into 4 rows x up to 4 positions of accumulators (positions tiled by 4,
//    the 4-row block is re-read from L1, not from memory, for each tile);
//  - n > kDirectMaxN: a panel of 32 W rows x kKc columns is converted once
//    into a small (64 KiB, L2-resident) f32 buffer, transposed so that a
//    12 x 32 register-blocked micro-kernel runs over all n positions.
// Results do not depend on how [r0, r1) is split among threads; f32 results
// for different n differ only by summation order (rel. error ~1e-6).
//
// Paths: AVX-512 (F/BW/VL, with F16C) and a portable one whose inner loops
// GCC/Clang vectorise for any SIMD width (SSE, AVX2, WebAssembly simd128);
// past kDirectMaxN positions the portable path converts a 32-row panel to f32
// and hands it to Eigen's GEMM.
// X, Y, b need no alignment. Thread safety: the packed path uses a
// thread_local scratch buffer; concurrent calls from different threads are fine.
#pragma once

#include <cstdint>

#include "model/arch/weight_matrix.h"
#include "model/core/numeric.h"

namespace kvscope {

struct WeightView {
  StoredType dtype = StoredType::kF32;
  const void* data = nullptr;  // rows x ld elements of dtype
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;  // elements from one row to the next; 0 = cols
  int64_t stride() const { return ld ? ld : cols; }
  // Stored as panels (weight_matrix.h; ld unused): rows x cols elements, and
  // r0 / r1 passed with it are multiples of kPanelRows (r1 may be rows).
  bool panels = false;
};

// Y[i * ldy + r] = sum_k X[i * ldx + k] * W[r, k] (+ b[r] if b), for i < n,
// r in [r0, r1). Y's other columns are not touched.
void linear_rows(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);

// Splitting [0, rows) among threads in multiples of this keeps every share
// on whole panels (required for a panel view; any split is correct for a
// row-major one).
constexpr int64_t kLinearRowBlock = kPanelRows;

// Largest n the row-streaming path takes (one W row at a time x all n). Past
// it the x loads (n per converted chunk) bound the row stream and the 4 x 4
// blocks (8 loads per 16 FMAs) win.
constexpr int64_t kRowStreamMaxN = 6;
// Largest n the direct (register-blocked, no scratch) path takes.
constexpr int64_t kDirectMaxN = 16;

namespace linear_detail {
// The individual paths, for benchmarks and tests (any n >= 1).
void rows_direct(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);
void rows_rowstream(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                    int64_t r0, int64_t r1);  // one W row at a time x all positions
void rows_packed(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);
void rows_generic(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1);  // the portable path, whatever the target
// A panel view (AVX-512: the broadcast kernel; elsewhere a plain loop, for
// tests: no other build stores panels).
void rows_panels(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);
#ifdef __wasm_simd128__
// n <= kDirectMaxN on WebAssembly: SIMD128 intrinsics, one position at a
// time (linear_simd128.cpp).
void rows_simd128(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1);
#endif
}  // namespace linear_detail

}  // namespace kvscope
