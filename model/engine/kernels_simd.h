// Helpers the kernel files (kernels.cpp: matrix-vector products,
// kernels_attend.cpp: attention) share, one definition each.
#pragma once

#include <immintrin.h>

namespace kvscope::simd {

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The sum of a register's eight floats.
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
#endif

}  // namespace kvscope::simd
