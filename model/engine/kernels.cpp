// The matrix-vector products (kernels.h: matvec_*): AVX-512, AVX2 and
// portable paths. The attention kernels are in kernels_attend.cpp.
#include "model/engine/kernels.h"

#include <immintrin.h>

#include "model/core/numeric.h"
#include "model/engine/kernels_simd.h"

namespace kvscope {
namespace {

// A bfloat16 weight: its own type so the kernels below pick the conversion.
struct Bf16 {
  uint16_t bits;
};
inline float bf16_value(Bf16 v) {
  return bf16_to_f32(v.bits);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16_tail(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline __m512 load16_tail(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load16(const Bf16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load16_tail(const Bf16* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// Four rows per pass: each load of x feeds four independent FMA chains,
// which hides the FMA latency a single dot product would wait on.
template <typename T>
void matvec_rows4(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  const int64_t full = cols & ~int64_t{15};
  const __mmask16 tail = static_cast<__mmask16>((1u << (cols - full)) - 1u);
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const T* w0 = W + r * cols;
    const T* w1 = w0 + cols;
    const T* w2 = w1 + cols;
    const T* w3 = w2 + cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < full; k += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k);
      a0 = _mm512_fmadd_ps(load16(w0 + k), xv, a0);
      a1 = _mm512_fmadd_ps(load16(w1 + k), xv, a1);
      a2 = _mm512_fmadd_ps(load16(w2 + k), xv, a2);
      a3 = _mm512_fmadd_ps(load16(w3 + k), xv, a3);
    }
    if (tail) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      a0 = _mm512_fmadd_ps(load16_tail(w0 + full, tail), xv, a0);
      a1 = _mm512_fmadd_ps(load16_tail(w1 + full, tail), xv, a1);
      a2 = _mm512_fmadd_ps(load16_tail(w2 + full, tail), xv, a2);
      a3 = _mm512_fmadd_ps(load16_tail(w3 + full, tail), xv, a3);
    }
    y[r] = _mm512_reduce_add_ps(a0) + (b ? b[r] : 0.0f);
    y[r + 1] = _mm512_reduce_add_ps(a1) + (b ? b[r + 1] : 0.0f);
    y[r + 2] = _mm512_reduce_add_ps(a2) + (b ? b[r + 2] : 0.0f);
    y[r + 3] = _mm512_reduce_add_ps(a3) + (b ? b[r + 3] : 0.0f);
  }
  for (; r < r1; ++r) {
    const T* w0 = W + r * cols;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t k = 0; k < full; k += 16) a0 = _mm512_fmadd_ps(load16(w0 + k), _mm512_loadu_ps(x + k), a0);
    if (tail) a0 = _mm512_fmadd_ps(load16_tail(w0 + full, tail), _mm512_maskz_loadu_ps(tail, x + full), a0);
    y[r] = _mm512_reduce_add_ps(a0) + (b ? b[r] : 0.0f);
  }
}

// One row at a time, four accumulators over k: the matrix is read as one
// sequential stream (rows are contiguous), which the hardware prefetcher
// follows best, while the four FMA chains hide the FMA latency.
template <typename T>
void matvec_stream(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  const int64_t full = cols & ~int64_t{15};
  const int64_t full4 = cols & ~int64_t{63};
  const __mmask16 tail = static_cast<__mmask16>((1u << (cols - full)) - 1u);
  for (int64_t r = r0; r < r1; ++r) {
    const T* w = W + r * cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k < full4; k += 64) {
      a0 = _mm512_fmadd_ps(load16(w + k), _mm512_loadu_ps(x + k), a0);
      a1 = _mm512_fmadd_ps(load16(w + k + 16), _mm512_loadu_ps(x + k + 16), a1);
      a2 = _mm512_fmadd_ps(load16(w + k + 32), _mm512_loadu_ps(x + k + 32), a2);
      a3 = _mm512_fmadd_ps(load16(w + k + 48), _mm512_loadu_ps(x + k + 48), a3);
    }
    for (; k < full; k += 16) a0 = _mm512_fmadd_ps(load16(w + k), _mm512_loadu_ps(x + k), a0);
    if (tail) a1 = _mm512_fmadd_ps(load16_tail(w + full, tail), _mm512_maskz_loadu_ps(tail, x + full), a1);
    y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))) + (b ? b[r] : 0.0f);
  }
}

#define KVSCOPE_VECTOR_KERNELS 1

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#define KVSCOPE_VECTOR_KERNELS 1

inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const Bf16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float to_f32(float v) {
  return v;
}
inline float to_f32(uint16_t v) {
  return f16_to_f32(v);
}
inline float to_f32(Bf16 v) {
  return bf16_value(v);
}

using simd::hsum;

// Four rows per pass sharing each load of x (as the AVX-512 path).
template <typename T>
void matvec_rows4(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  const int64_t full = cols & ~int64_t{7};
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const T* w[4] = {W + r * cols, W + (r + 1) * cols, W + (r + 2) * cols, W + (r + 3) * cols};
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < full; k += 8) {
      const __m256 xv = _mm256_loadu_ps(x + k);
      a0 = _mm256_fmadd_ps(load8(w[0] + k), xv, a0);
      a1 = _mm256_fmadd_ps(load8(w[1] + k), xv, a1);
      a2 = _mm256_fmadd_ps(load8(w[2] + k), xv, a2);
      a3 = _mm256_fmadd_ps(load8(w[3] + k), xv, a3);
    }
    const float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
    for (int j = 0; j < 4; ++j) {
      float t = s[j];
      for (int64_t k = full; k < cols; ++k) t += to_f32(w[j][k]) * x[k];
      y[r + j] = t + (b ? b[r + j] : 0.0f);
    }
  }
  for (; r < r1; ++r) {
    const T* w0 = W + r * cols;
    __m256 a0 = _mm256_setzero_ps();
    for (int64_t k = 0; k < full; k += 8) a0 = _mm256_fmadd_ps(load8(w0 + k), _mm256_loadu_ps(x + k), a0);
    float t = hsum(a0);
    for (int64_t k = full; k < cols; ++k) t += to_f32(w0[k]) * x[k];
    y[r] = t + (b ? b[r] : 0.0f);
  }
}

// One row at a time, four accumulators over k: one sequential stream (as the
// AVX-512 path).
template <typename T>
void matvec_stream(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  const int64_t full = cols & ~int64_t{7};
  const int64_t full4 = cols & ~int64_t{31};
  for (int64_t r = r0; r < r1; ++r) {
    const T* w = W + r * cols;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k < full4; k += 32) {
      a0 = _mm256_fmadd_ps(load8(w + k), _mm256_loadu_ps(x + k), a0);
      a1 = _mm256_fmadd_ps(load8(w + k + 8), _mm256_loadu_ps(x + k + 8), a1);
      a2 = _mm256_fmadd_ps(load8(w + k + 16), _mm256_loadu_ps(x + k + 16), a2);
      a3 = _mm256_fmadd_ps(load8(w + k + 24), _mm256_loadu_ps(x + k + 24), a3);
    }
    for (; k < full; k += 8) a0 = _mm256_fmadd_ps(load8(w + k), _mm256_loadu_ps(x + k), a0);
    float t = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; k < cols; ++k) t += to_f32(w[k]) * x[k];
    y[r] = t + (b ? b[r] : 0.0f);
  }
}

#else

// Portable path (generic x86-64, the sanitizer builds): plain loops the
// compiler may vectorise.
inline float to_f32(float v) {
  return v;
}
inline float to_f32(uint16_t v) {
  return f16_to_f32(v);
}
inline float to_f32(Bf16 v) {
  return bf16_value(v);
}

template <typename T>
void matvec(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* w = W + r * cols;
    float s = 0;
    for (int64_t k = 0; k < cols; ++k) s += to_f32(w[k]) * x[k];
    y[r] = s + (b ? b[r] : 0.0f);
  }
}

#endif

#ifdef KVSCOPE_VECTOR_KERNELS
// Long rows (a real model's 768+ columns) stream best one row at a time;
// short ones (the default model's, cache-resident) gain from sharing x.
template <typename T>
void matvec(const T* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  if (cols >= 512) {
    matvec_stream(W, cols, x, b, y, r0, r1);
  } else {
    matvec_rows4(W, cols, x, b, y, r0, r1);
  }
}
#endif

}  // namespace

void matvec_f32(const float* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  matvec(W, cols, x, b, y, r0, r1);
}

void matvec_f16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  matvec(W, cols, x, b, y, r0, r1);
}

void matvec_bf16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  matvec(reinterpret_cast<const Bf16*>(W), cols, x, b, y, r0, r1);
}

}  // namespace kvscope
