// Rows r0..r1 of Y = X W^T + b for n rows of X, with W (rows, cols) in its
// stored dtype (F32, F16 = IEEE binary16, BF16 = upper half of an f32),
// row-major or as panels of kPanelRows rows (weight_matrix.h: 32 natively,
// 16 in WebAssembly).
//
// Every weight is read from memory once per call, whatever n is.
//  - Panels (what the loaders store where AVX-512 is built, and in
//    WebAssembly: linear_simd128.cpp) take every n, decode included: per
//    column, the panel's weights are loaded and converted once per group of
//    positions and multiplied by each position's broadcast input
//    (groups of up to 8 positions over an L1-resident chunk of 256 columns),
//    with a software prefetch that keeps the weights streaming while a
//    batch's multiply-adds run. On GPT-2-124M F16 a 5-position forward
//    costs about 1.2 decode steps and 8 about 1.5 (1.83 and 2.28 with the
//    row-major AVX-512 kernels these replaced; docs/batching.md).
//  - Row-major weights (builds without AVX-512 or SIMD128; tests):
//    n <= kDirectMaxN: blocks of 4 rows x 4 positions of accumulators, as
//    plain loops the compiler vectorises for any SIMD width (SSE, AVX2);
//    n > kDirectMaxN: a block of kLinearRowBlock rows converted once into a
//    thread_local f32 buffer and multiplied by Eigen's GEMM.
// Results do not depend on how [r0, r1) is split among threads; f32 results
// for different n differ only by summation order (rel. error ~1e-6).
// X, Y, b need no alignment. Thread safety: the row-major GEMM path uses a
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

// Largest n the row-major blocks take before Eigen's GEMM.
constexpr int64_t kDirectMaxN = 16;

namespace linear_detail {
// The individual paths, for benchmarks and tests (any n >= 1).
void rows_packed(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);  // row-major: kLinearRowBlock-row f32 blocks and Eigen's GEMM
void rows_generic(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1);  // row-major: the portable blocks
// A panel view (AVX-512 and WebAssembly SIMD128: the broadcast kernels;
// elsewhere a plain loop, for tests: no other build stores panels).
void rows_panels(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1);
// The panel kernels' (f32 and bf16) blocking, chosen on this project's Zen 4
// (docs/batching.md): a chunk of kPanelKc columns of a panel (32 x 256 f16 =
// 16 KiB; in WebAssembly 16 x 256 f32, the same) stays in L1 while every
// group of up to kPanelGroup positions reads it (8 x 2 halves = 16
// accumulators); a prefetch kPanelPrefetch columns
// ahead (2 KiB of f16) keeps the stream going while a group computes (and in
// the bf16 kernel a chunk's later groups fetch the next chunk into L2).
constexpr int64_t kPanelKc = 256;
constexpr int kPanelGroup = 8;
constexpr int64_t kPanelPrefetch = 32;
// The panel kernels' walk over rows [r0, r1) of a (rows, cols) matrix of
// panels and n positions: for each panel (its first row r, m rows), each
// chunk of kc <= kPanelKc columns from k0, and each group of np positions
// from p, f(r, m, k0, kc, p, np). Positions go in equal groups of at most
// kPanelGroup (12 = 6 + 6, not 8 + 4).
template <class F>
inline void walk_panels(int64_t rows, int64_t cols, int64_t n, int64_t r0, int64_t r1, const F& f) {
  const int64_t groups = (n + kPanelGroup - 1) / kPanelGroup, g = (n + groups - 1) / groups;
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const int64_t m = rows - r < kPanelRows ? rows - r : kPanelRows;
    for (int64_t k0 = 0; k0 < cols; k0 += kPanelKc) {
      const int64_t kc = cols - k0 < kPanelKc ? cols - k0 : kPanelKc;
      for (int64_t p = 0; p < n; p += g) f(r, m, k0, kc, p, n - p < g ? n - p : g);
    }
  }
}

// BF16 products (WeightMatrix::bf16_products): each position's inputs
// rounded to bf16 (to nearest even, as f32_to_bf16), (n, cols) row-major.
void round_rows_to_bf16(const float* X, int64_t n, int64_t ldx, int64_t cols, uint16_t* out);
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
constexpr bool kBf16DotKernel = kPanelWeights;
// BF16 panels times bf16 inputs X (n, ldx) with AVX512_BF16's dot product:
// two exact products per lane and instruction, summed in f32 (twice the
// multiply-adds per instruction of the f32 panels; a different order of
// additions). Rows as rows_panels; cols must be even.
void rows_panels_bf16(const uint16_t* W, int64_t rows, int64_t cols, const uint16_t* X, int64_t n, int64_t ldx,
                      const float* b, float* Y, int64_t ldy, int64_t r0, int64_t r1);
#else
constexpr bool kBf16DotKernel = false;
#endif
#ifdef __wasm_simd128__
// Panels on WebAssembly: SIMD128 intrinsics, any n (linear_simd128.cpp).
void rows_panels_simd128(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y,
                         int64_t ldy, int64_t r0, int64_t r1);
#endif
}  // namespace linear_detail

}  // namespace kvscope
