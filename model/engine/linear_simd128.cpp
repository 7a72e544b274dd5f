// linear_detail::rows_panels_simd128 (linear_kernels.h): the products on
// WebAssembly, on panels of kPanelRows = 16 rows (weight_matrix.h), written
// with SIMD128 intrinsics. For each column k the panel's 16 weights are four
// f32x4 (converted from f16 / bf16 once per pair of positions), and each
// position's x[k] is one splat: per 16 multiply-adds 4 loads, 4 f32x4.mul,
// 4 f32x4.add (no FMA in SIMD128) and no horizontal sums. Positions go two at a time (8
// accumulators); one position alone alternates two sets of accumulators by
// column (the add's latency). 16-row panels measured 1.6x the row-major
// 4-row blocks for one position and 2.8x Eigen's GEMM for a prefill under
// Chromium's V8; 32-row panels spilled (tools/web/kernel_bench.cpp,
// docs/web.md).
//
// F16 is converted in registers: i32x4.extend_low/high_i16x8_s, i32x4.shl 13,
// v128.and (sign | exponent | mantissa in place) and f32x4.mul by 2^112 (exact
// for normals, subnormals and zero; no f16 instruction in SIMD128), plus an
// i16x8.max_u over |h| that flags a chunk holding inf/NaN, which is then
// recomputed by the exact scalar loop.
#include "model/engine/linear_elements.h"
#include "model/engine/linear_kernels.h"

#ifdef __wasm_simd128__
#include <wasm_simd128.h>

namespace kvscope {
namespace linear_detail {

namespace {

static_assert(kPanelRows == 16, "the SIMD128 panels are four f32x4 per column");

// One column's 16 weights as four f32x4 (rows 0-3, 4-7, 8-11, 12-15).
inline void load_column(const float* p, v128_t (&w)[4], v128_t&) {
  for (int i = 0; i < 4; ++i) w[i] = wasm_v128_load(p + 4 * i);
}
inline v128_t f16_quarter_to_f32(v128_t x) {  // x: 4 f16 sign-extended to i32
  const v128_t bits = wasm_v128_and(wasm_i32x4_shl(x, 13), wasm_i32x4_const_splat(static_cast<int32_t>(0x8fffe000u)));
  return wasm_f32x4_mul(bits, wasm_f32x4_const_splat(0x1p112f));
}
inline void load_column(const F16* p, v128_t (&w)[4], v128_t& big) {
  const v128_t h0 = wasm_v128_load(p), h1 = wasm_v128_load(p + 8);
  const v128_t abs_mask = wasm_i16x8_const_splat(0x7fff);
  big = wasm_u16x8_max(big, wasm_u16x8_max(wasm_v128_and(h0, abs_mask), wasm_v128_and(h1, abs_mask)));
  w[0] = f16_quarter_to_f32(wasm_i32x4_extend_low_i16x8(h0));
  w[1] = f16_quarter_to_f32(wasm_i32x4_extend_high_i16x8(h0));
  w[2] = f16_quarter_to_f32(wasm_i32x4_extend_low_i16x8(h1));
  w[3] = f16_quarter_to_f32(wasm_i32x4_extend_high_i16x8(h1));
}
inline void load_column(const Bf16* p, v128_t (&w)[4], v128_t&) {
  const v128_t h0 = wasm_v128_load(p), h1 = wasm_v128_load(p + 8);
  w[0] = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h0), 16);
  w[1] = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h0), 16);
  w[2] = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h1), 16);
  w[3] = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h1), 16);
}

// One column k into accumulators acc[p] for NB positions.
template <typename T, int NB>
inline void panel_column(const T* P, const float* x, int64_t ldx, v128_t (&acc)[NB][4], v128_t& big) {
  v128_t w[4];
  load_column(P, w, big);
  for (int p = 0; p < NB; ++p) {
    const v128_t xb = wasm_v128_load32_splat(x + p * ldx);
    for (int i = 0; i < 4; ++i) acc[p][i] = wasm_f32x4_add(acc[p][i], wasm_f32x4_mul(w[i], xb));
  }
}

// Columns [0, kc) of a full panel chunk P (kc, 16) for NB positions (X at the
// chunk's first column), added to Y (first: Y = the sums + b); false, with
// nothing written, when an F16 weight of the chunk is inf or NaN.
template <typename T, int NB>
bool panel_group(const T* P, int64_t kc, const float* X, int64_t ldx, float* Y, int64_t ldy, const float* b,
                 bool first) {
  constexpr int kSets = NB == 1 ? 2 : 1;
  v128_t acc[kSets][NB][4];
  for (auto& set : acc)
    for (auto& a : set)
      for (v128_t& v : a) v = wasm_f32x4_splat(0.0f);
  v128_t big = wasm_i16x8_splat(0);
  int64_t k = 0;
  for (; k + kSets <= kc; k += kSets)
    for (int s = 0; s < kSets; ++s) panel_column<T, NB>(P + (k + s) * kPanelRows, X + k + s, ldx, acc[s], big);
  for (; k < kc; ++k) panel_column<T, NB>(P + k * kPanelRows, X + k, ldx, acc[0], big);
  if (wasm_v128_any_true(wasm_i16x8_gt(big, wasm_i16x8_const_splat(0x7bff)))) return false;
  for (int p = 0; p < NB; ++p) {
    float* y = Y + p * ldy;
    for (int i = 0; i < 4; ++i) {
      v128_t v = acc[0][p][i];
      if constexpr (kSets == 2) v = wasm_f32x4_add(v, acc[1][p][i]);
      const v128_t prev = first ? (b ? wasm_v128_load(b + 4 * i) : wasm_f32x4_splat(0.0f)) : wasm_v128_load(y + 4 * i);
      wasm_v128_store(y + 4 * i, wasm_f32x4_add(v, prev));
    }
  }
  return true;
}

template <typename T>
void panel_rows(const T* W, int64_t rows, int64_t cols, const float* X, int64_t n, int64_t ldx, const float* b,
                float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  walk_panels(rows, cols, n, r0, r1, [&](int64_t r, int64_t m, int64_t k0, int64_t kc, int64_t p, int64_t np) {
    const T* P = W + r * cols + k0 * m;  // the chunk of the panel's (cols, m)
    const float* x = X + p * ldx + k0;
    float* y = Y + p * ldy + r;
    const float* br = b ? b + r : nullptr;
    const bool first = k0 == 0;
    bool done = m == kPanelRows;
    for (int64_t q = 0; done && q < np; q += 2) {
      done = np - q >= 2 ? panel_group<T, 2>(P, kc, x + q * ldx, ldx, y + q * ldy, ldy, br, first)
                         : panel_group<T, 1>(P, kc, x + q * ldx, ldx, y + q * ldy, ldy, br, first);
    }
    // A group returns false before writing, and only the first can (the
    // same chunk for every group): all np positions exactly, for a panel of
    // m < 16 rows (the last one) or F16 weights holding inf/NaN.
    if (!done) panel_chunk_exact(P, m, kc, x, ldx, np, y, ldy, br, first);
  });
}

}  // namespace

void rows_panels_simd128(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y,
                         int64_t ldy, int64_t r0, int64_t r1) {
  with_type(W.dtype, W.data, [&](auto* w) { panel_rows(w, W.rows, W.cols, X, n, ldx, b, Y, ldy, r0, r1); });
}

}  // namespace linear_detail
}  // namespace kvscope

#endif  // __wasm_simd128__
