// The weight kernels' element types (linear_kernels.cpp, linear_simd128.cpp):
// a tag per stored dtype and its one scalar conversion to f32, branch-free so
// it vectorises, exact for every value (normals, subnormals, inf, NaN); and
// the one dispatch from a stored dtype to its tag (with_type).
#pragma once

#include <cstdint>
#include <cstring>

#include "model/core/numeric.h"

namespace kvscope {
namespace linear_detail {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct F16 {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

inline float to_f32(float v) {
  return v;
}
inline float to_f32(F16 v) {
  const uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000u) << 16;
  const uint32_t em = v.bits & 0x7fffu;
  // Exponent and mantissa shifted into an f32 and scaled by 2^(127 - 15):
  // exact for normals and subnormals alike.
  uint32_t bits = f32_to_bits(bits_to_f32(em << 13) * 0x1p112f);
  if (em >= 0x7c00u) bits = 0x7f800000u | (em << 13);  // inf, nan
  return bits_to_f32(bits | sign);
}
inline float to_f32(Bf16 v) {
  return bits_to_f32(static_cast<uint32_t>(v.bits) << 16);
}

// Calls f with `data` as a pointer to its element type.
template <typename F>
void with_type(StoredType dtype, const void* data, F&& f) {
  switch (dtype) {
    case StoredType::kF32:
      return f(static_cast<const float*>(data));
    case StoredType::kF16:
      return f(static_cast<const F16*>(data));
    case StoredType::kBF16:
      return f(static_cast<const Bf16*>(data));
  }
}

// One chunk of a panel (walk_panels: kc columns of a panel of m rows, stored
// column by column, P = (kc, m)) for np positions, one multiply-add at a
// time: exact for any weight, inf and NaN included. Y (np, ldy) gets the
// bias (first chunk) or its running sums plus this chunk's. The panel
// kernels' fallback and the panels of builds with neither AVX-512 nor SIMD128.
template <typename T>
void panel_chunk_exact(const T* P, int64_t m, int64_t kc, const float* X, int64_t ldx, int64_t np, float* Y,
                       int64_t ldy, const float* b, bool first) {
  for (int64_t p = 0; p < np; ++p)
    for (int64_t i = 0; i < m; ++i) {
      float s = 0;
      for (int64_t k = 0; k < kc; ++k) s += to_f32(P[k * m + i]) * X[p * ldx + k];
      float& y = Y[p * ldy + i];
      y = s + (first ? (b ? b[i] : 0.0f) : y);
    }
}

}  // namespace linear_detail
}  // namespace kvscope
