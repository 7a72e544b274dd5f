// The weight kernels' element types (linear_kernels.cpp, linear_simd128.cpp):
// a tag per stored dtype and its scalar conversion to f32 (numeric.h's, which
// is branch-free, so it vectorises); and the one dispatch from a stored dtype
// to its tag (with_type).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "model/core/numeric.h"

namespace kvscope {
namespace linear_detail {

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
  return f16_to_f32(v.bits);
}
inline float to_f32(Bf16 v) {
  return bf16_to_f32(v.bits);
}

// Calls f with `data` as a pointer to its element type. Float types only:
// quantized blocks have no element type (linear_quant.h multiplies them).
template <typename F>
void with_type(StoredType dtype, const void* data, F&& f) {
  switch (dtype) {
    case StoredType::kF32:
      return f(static_cast<const float*>(data));
    case StoredType::kF16:
      return f(static_cast<const F16*>(data));
    case StoredType::kBF16:
      return f(static_cast<const Bf16*>(data));
    default:
      throw std::logic_error(std::string("linear: no element type for ") + to_string(dtype) + " blocks");
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
