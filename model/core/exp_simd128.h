// exp of four floats with WebAssembly SIMD128, for the softmaxes (the
// attention's, kernels_attend.cpp, and the sampler's). Eigen 3.4 has no
// SIMD128 packets, so in the page its exp is libm's expf one value at a
// time: about 6 000 calls in a decode step of kvscope-tiny (docs/web.md).
// This is Eigen's packet exp for float (GenericPacketMathFunctions.h:
// Cephes' range reduction and polynomial, the same constants and steps),
// with a multiply and an add where Eigen fuses them (SIMD128 has no FMA) and
// 2^m applied as two exact factors 2^(m/2).
#pragma once

#ifdef __wasm_simd128__
#include <wasm_simd128.h>

namespace kvscope {

inline v128_t exp_f32x4(v128_t x_in) {
  // (pmin / pmax: one instruction each; the IEEE min / max take several under V8.)
  const v128_t x = wasm_f32x4_pmax(wasm_f32x4_pmin(x_in, wasm_f32x4_splat(88.723f)), wasm_f32x4_splat(-88.723f));
  // exp(x) = 2^m exp(r), m = floor(x log2(e) + 1/2), r = x - m ln(2) in two parts.
  const v128_t m = wasm_f32x4_floor(
      wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)), wasm_f32x4_splat(0.5f)));
  v128_t r = wasm_f32x4_add(wasm_f32x4_mul(m, wasm_f32x4_splat(-0.693359375f)), x);
  r = wasm_f32x4_add(wasm_f32x4_mul(m, wasm_f32x4_splat(2.12194440e-4f)), r);
  const v128_t r2 = wasm_f32x4_mul(r, r), r3 = wasm_f32x4_mul(r2, r);
  const auto madd = [](v128_t a, v128_t b, float c) {
    return wasm_f32x4_add(wasm_f32x4_mul(a, b), wasm_f32x4_splat(c));
  };
  v128_t y = madd(wasm_f32x4_splat(1.9875691500E-4f), r, 1.3981999507E-3f);
  v128_t y1 = madd(wasm_f32x4_splat(4.1665795894E-2f), r, 1.6666665459E-1f);
  const v128_t y2 = wasm_f32x4_add(r, wasm_f32x4_splat(1.0f));
  y = madd(y, r, 8.3334519073E-3f);
  y1 = madd(y1, r, 5.0000001201E-1f);
  y = wasm_f32x4_add(wasm_f32x4_mul(y, r3), y1);
  y = wasm_f32x4_add(wasm_f32x4_mul(y, r2), y2);
  // 2^m for m in [-128, 128] as 2^a 2^b, a = floor(m / 2), b = m - a: both
  // normal floats, so only the last product can round (below 2^-126).
  // m is a whole number in [-128, 128]: adding 1.5 * 2^23 puts it in the
  // low mantissa bits (cheaper than a saturating conversion under V8).
  const v128_t magic = wasm_f32x4_splat(12582912.0f);
  const v128_t mi = wasm_i32x4_sub(wasm_f32x4_add(m, magic), magic);
  const v128_t a = wasm_i32x4_shr(mi, 1), b = wasm_i32x4_sub(mi, a);
  const v128_t bias = wasm_i32x4_splat(127);
  const v128_t pa = wasm_i32x4_shl(wasm_i32x4_add(a, bias), 23), pb = wasm_i32x4_shl(wasm_i32x4_add(b, bias), 23);
  return wasm_f32x4_pmax(wasm_f32x4_mul(wasm_f32x4_mul(y, pa), pb), x_in);
}

// p[i] = exp(p[i]) for i < n; the last partial group of four through a
// padded copy, so every value takes the same steps wherever it lies.
inline void exp_in_place_simd128(float* p, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(p + i, exp_f32x4(wasm_v128_load(p + i)));
  if (i == n) return;
  float t[4] = {0, 0, 0, 0};
  for (int j = 0; i + j < n; ++j) t[j] = p[i + j];
  wasm_v128_store(t, exp_f32x4(wasm_v128_load(t)));
  for (int j = 0; i + j < n; ++j) p[i + j] = t[j];
}

}  // namespace kvscope

#endif  // __wasm_simd128__
