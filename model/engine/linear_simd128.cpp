// linear_detail::rows_simd128 (linear_kernels.h): the few-position products
// (decode) written with WebAssembly SIMD128 intrinsics. The portable path's
// 16-lane accumulators (linear_kernels.cpp) compile to 32+ live v128 values
// per 4-row block, more than the 16 XMM registers V8 allocates on x86-64, so
// they spill; here 4 rows x 2 accumulators of 4 lanes stay in registers.
//
// Per 8 weights of a row: F32 two loads, two f32x4.mul, two f32x4.add (no FMA
// in SIMD128); F16 one load, then per 4 lanes i32x4.extend_low/high_i16x8_s,
// i32x4.shl 13, v128.and (sign | exponent | mantissa in place) and f32x4.mul
// by 2^112 (exact for normals, subnormals and zero; no f16 instruction in
// SIMD128), plus an i16x8.max_u over |h| that flags a block holding inf/NaN,
// which is then recomputed by the exact portable path.
#include "model/engine/linear_elements.h"
#include "model/engine/linear_kernels.h"

#ifdef __wasm_simd128__
#include <wasm_simd128.h>

namespace kvscope {
namespace linear_detail {

namespace {

// 8 consecutive weights as two f32x4 (lanes 0-3, 4-7).
inline void load8(const float* p, v128_t& lo, v128_t& hi, v128_t&) {
  lo = wasm_v128_load(p);
  hi = wasm_v128_load(p + 4);
}
inline v128_t f16_half_to_f32(v128_t x) {  // x: 4 f16 sign-extended to i32
  const v128_t bits = wasm_v128_and(wasm_i32x4_shl(x, 13), wasm_i32x4_const_splat(static_cast<int32_t>(0x8fffe000u)));
  return wasm_f32x4_mul(bits, wasm_f32x4_const_splat(0x1p112f));
}
inline void load8(const F16* p, v128_t& lo, v128_t& hi, v128_t& big) {
  const v128_t h = wasm_v128_load(p);
  big = wasm_u16x8_max(big, wasm_v128_and(h, wasm_i16x8_const_splat(0x7fff)));
  lo = f16_half_to_f32(wasm_i32x4_extend_low_i16x8(h));
  hi = f16_half_to_f32(wasm_i32x4_extend_high_i16x8(h));
}
inline void load8(const Bf16* p, v128_t& lo, v128_t& hi, v128_t&) {
  const v128_t h = wasm_v128_load(p);
  lo = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(h), 16);
  hi = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(h), 16);
}

inline float hsum(v128_t v) {
  return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
         (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

// y[r + i] = W[r + i, :] . x (+ b) for i < R; false (nothing written) when
// an F16 row holds inf or NaN, which the fast conversion does not represent.
// 4 rows x 8 columns a step measured fastest (8 accumulators; 2 x 16 columns,
// 8 x 8 and 4 x 16 were 5-25 % slower under V8).
template <typename T, int R>
inline bool block(const T* w, int64_t ldw, int64_t cols, const float* x, const float* b, float* y, int64_t r) {
  v128_t a0[R], a1[R];
  for (int i = 0; i < R; ++i) a0[i] = a1[i] = wasm_f32x4_splat(0.0f);
  v128_t big = wasm_i16x8_splat(0);
  const int64_t full = cols & ~int64_t{7};
  for (int64_t k = 0; k < full; k += 8) {
    const v128_t x0 = wasm_v128_load(x + k), x1 = wasm_v128_load(x + k + 4);
    for (int i = 0; i < R; ++i) {
      v128_t lo, hi;
      load8(w + i * ldw + k, lo, hi, big);
      a0[i] = wasm_f32x4_add(a0[i], wasm_f32x4_mul(lo, x0));
      a1[i] = wasm_f32x4_add(a1[i], wasm_f32x4_mul(hi, x1));
    }
  }
  if (wasm_v128_any_true(wasm_i16x8_gt(big, wasm_i16x8_const_splat(0x7bff)))) return false;
  for (int i = 0; i < R; ++i) {
    float s = hsum(wasm_f32x4_add(a0[i], a1[i]));
    for (int64_t k = full; k < cols; ++k) s += to_f32(w[i * ldw + k]) * x[k];
    y[r + i] = s + (b ? b[r + i] : 0.0f);
  }
  return true;
}

template <typename T>
void rows_one(const WeightView& W, const T* w, int64_t ldw, const float* x, const float* b, float* y, int64_t r0,
              int64_t r1) {
  const int64_t cols = W.cols;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    if (!block<T, 4>(w + r * ldw, ldw, cols, x, b, y, r)) rows_generic(W, x, 1, cols, b, y, 0, r, r + 4);
  }
  for (; r < r1; ++r) {
    if (!block<T, 1>(w + r * ldw, ldw, cols, x, b, y, r)) rows_generic(W, x, 1, cols, b, y, 0, r, r + 1);
  }
}

}  // namespace

void rows_simd128(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  // Each position on its own: W's rows come from cache for the second one.
  for (int64_t p = 0; p < n; ++p) {
    const float* x = X + p * ldx;
    float* y = Y + p * ldy;
    switch (W.dtype) {
      case StoredType::kF32:
        rows_one(W, static_cast<const float*>(W.data), W.stride(), x, b, y, r0, r1);
        break;
      case StoredType::kF16:
        rows_one(W, static_cast<const F16*>(W.data), W.stride(), x, b, y, r0, r1);
        break;
      case StoredType::kBF16:
        rows_one(W, static_cast<const Bf16*>(W.data), W.stride(), x, b, y, r0, r1);
        break;
    }
  }
}

}  // namespace linear_detail
}  // namespace kvscope

#endif  // __wasm_simd128__
