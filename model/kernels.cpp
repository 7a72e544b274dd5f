#include "kernels.h"

#include <immintrin.h>

#include <Eigen/Dense>

#include "safetensors.h"  // f16_to_f32

namespace kvscope {
namespace {

// Softmax of p[0, len) in place, scaled: p[j] = exp(p[j] - max) / sum.
void softmax(float* p, int len) {
  Eigen::Map<Eigen::ArrayXf> a(p, len);
  a = (a - a.maxCoeff()).exp();
  a *= 1.0f / a.sum();
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

// NC = ceil(hd / 16) 16-float chunks per head slice, the last one masked:
// the query and the output accumulators then live in registers.
template <int NC>
void attend_chunks(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale,
                   float* p, float* out) {
  const int rem = hd - 16 * (NC - 1);
  const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xFFFFu : (1u << rem) - 1u);
  auto mask = [&](int c) { return c == NC - 1 ? last : static_cast<__mmask16>(0xFFFFu); };
  __m512 qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = _mm512_maskz_loadu_ps(mask(c), q + 16 * c);

  // Scores, four keys per pass (four independent FMA chains).
  int j = 0;
  for (; j + 4 <= len; j += 4) {
    const float* k0 = K + j * stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < NC; ++c) {
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask(c), k0 + 16 * c), qv[c], a0);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask(c), k0 + stride + 16 * c), qv[c], a1);
      a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask(c), k0 + 2 * stride + 16 * c), qv[c], a2);
      a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask(c), k0 + 3 * stride + 16 * c), qv[c], a3);
    }
    p[j] = _mm512_reduce_add_ps(a0) * scale;
    p[j + 1] = _mm512_reduce_add_ps(a1) * scale;
    p[j + 2] = _mm512_reduce_add_ps(a2) * scale;
    p[j + 3] = _mm512_reduce_add_ps(a3) * scale;
  }
  for (; j < len; ++j) {
    __m512 a0 = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c)
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask(c), K + j * stride + 16 * c), qv[c], a0);
    p[j] = _mm512_reduce_add_ps(a0) * scale;
  }
  softmax(p, len);

  // Weighted values, two keys per pass into separate accumulators.
  __m512 o0[NC], o1[NC];
  for (int c = 0; c < NC; ++c) o0[c] = o1[c] = _mm512_setzero_ps();
  j = 0;
  for (; j + 2 <= len; j += 2) {
    const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
    const float* v0 = V + j * stride;
    for (int c = 0; c < NC; ++c) {
      o0[c] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(mask(c), v0 + 16 * c), o0[c]);
      o1[c] = _mm512_fmadd_ps(p1, _mm512_maskz_loadu_ps(mask(c), v0 + stride + 16 * c), o1[c]);
    }
  }
  if (j < len) {
    const __m512 p0 = _mm512_set1_ps(p[j]);
    for (int c = 0; c < NC; ++c) {
      o0[c] = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(mask(c), V + j * stride + 16 * c), o0[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(out + 16 * c, mask(c), _mm512_add_ps(o0[c], o1[c]));
}

#define KVSCOPE_ATTEND_CHUNKS 1
#define KVSCOPE_VECTOR_KERNELS 1

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#define KVSCOPE_VECTOR_KERNELS 1

inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float to_f32(float v) {
  return v;
}
inline float to_f32(uint16_t v) {
  return f16_to_f32(v);
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

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

void attend(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale, float* p,
            float* out) {
#ifdef KVSCOPE_ATTEND_CHUNKS
  switch ((hd + 15) / 16) {
    case 1:
      return attend_chunks<1>(q, K, V, stride, hd, len, scale, p, out);
    case 2:
      return attend_chunks<2>(q, K, V, stride, hd, len, scale, p, out);
    case 3:
      return attend_chunks<3>(q, K, V, stride, hd, len, scale, p, out);
    case 4:
      return attend_chunks<4>(q, K, V, stride, hd, len, scale, p, out);
    default:
      break;  // wider heads: the Eigen path below
  }
#endif
  using Rows =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;
  const Rows Km(K, len, hd, Eigen::OuterStride<>(stride));
  const Rows Vm(V, len, hd, Eigen::OuterStride<>(stride));
  Eigen::Map<Eigen::VectorXf> s(p, len);
  s.noalias() = (Km * Eigen::Map<const Eigen::VectorXf>(q, hd)) * scale;
  softmax(p, len);
  Eigen::Map<Eigen::VectorXf>(out, hd).noalias() = Vm.transpose() * s;
}

void matvec_f32(const float* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  matvec(W, cols, x, b, y, r0, r1);
}

void matvec_f16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1) {
  matvec(W, cols, x, b, y, r0, r1);
}

}  // namespace kvscope
