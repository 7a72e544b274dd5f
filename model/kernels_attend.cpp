// One query's attention over cached keys and values (kernels.h: attend,
// attend_rows): an AVX-512 path (16-float chunks, masked tails), an AVX2 one
// (8-float chunks) and a portable one, each dequantizing stored rows in
// registers and running the same arithmetic in the same order for every layout.
#include <immintrin.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cstring>

#include "kernels.h"  // IWYU pragma: associated
#include "kernels_simd.h"
#include "kv_quant.h"
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

// NC = ceil(hd / 16) 16-float chunks per head slice, the last one masked:
// the query and the output accumulators then live in registers. `load(j,
// c, m)` returns chunk c of key (or value) row j: a plain load for f32
// rows, a conversion / dequantization in registers for f16 and quantized
// rows. Every layout runs the same arithmetic in the same order, so a
// cache's layout never changes f32 results.
template <int NC, class LoadK, class LoadV>
void attend_keys(const float* q, const LoadK& load_k, const LoadV& load_v, int hd, int len, float scale, float* p,
                 float* out) {
  const int rem = hd - 16 * (NC - 1);
  const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xFFFFu : (1u << rem) - 1u);
  auto mask = [&](int c) { return c == NC - 1 ? last : static_cast<__mmask16>(0xFFFFu); };
  __m512 qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = _mm512_maskz_loadu_ps(mask(c), q + 16 * c);

  // Scores, four keys per pass (four independent FMA chains).
  int j = 0;
  for (; j + 4 <= len; j += 4) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < NC; ++c) {
      a0 = _mm512_fmadd_ps(load_k(j, c, mask(c)), qv[c], a0);
      a1 = _mm512_fmadd_ps(load_k(j + 1, c, mask(c)), qv[c], a1);
      a2 = _mm512_fmadd_ps(load_k(j + 2, c, mask(c)), qv[c], a2);
      a3 = _mm512_fmadd_ps(load_k(j + 3, c, mask(c)), qv[c], a3);
    }
    p[j] = _mm512_reduce_add_ps(a0) * scale;
    p[j + 1] = _mm512_reduce_add_ps(a1) * scale;
    p[j + 2] = _mm512_reduce_add_ps(a2) * scale;
    p[j + 3] = _mm512_reduce_add_ps(a3) * scale;
  }
  for (; j < len; ++j) {
    __m512 a0 = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) a0 = _mm512_fmadd_ps(load_k(j, c, mask(c)), qv[c], a0);
    p[j] = _mm512_reduce_add_ps(a0) * scale;
  }
  softmax(p, len);

  // Weighted values, two keys per pass into separate accumulators.
  __m512 o0[NC], o1[NC];
  for (int c = 0; c < NC; ++c) o0[c] = o1[c] = _mm512_setzero_ps();
  j = 0;
  for (; j + 2 <= len; j += 2) {
    const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
    for (int c = 0; c < NC; ++c) {
      o0[c] = _mm512_fmadd_ps(p0, load_v(j, c, mask(c)), o0[c]);
      o1[c] = _mm512_fmadd_ps(p1, load_v(j + 1, c, mask(c)), o1[c]);
    }
  }
  if (j < len) {
    const __m512 p0 = _mm512_set1_ps(p[j]);
    for (int c = 0; c < NC; ++c) o0[c] = _mm512_fmadd_ps(p0, load_v(j, c, mask(c)), o0[c]);
  }
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(out + 16 * c, mask(c), _mm512_add_ps(o0[c], o1[c]));
}

// Chunk loaders. Contiguous f32 rows (`stride` floats apart):
struct LoadContiguous {
  const float* base;
  int64_t stride;
  __m512 operator()(int j, int c, __mmask16 m) const { return _mm512_maskz_loadu_ps(m, base + j * stride + 16 * c); }
};

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// One row pointer per key; values [col + 16c, col + 16c + 16) of the row.
template <KVDtype D>
struct LoadRows {
  const uint8_t* const* rows;
  int col;
  __m512 operator()(int j, int c, __mmask16 m) const {
    const uint8_t* row = rows[j];
    const int c0 = col + 16 * c;
    if constexpr (D == KVDtype::kF32) {
      return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c0);
    } else if constexpr (D == KVDtype::kF16) {
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + c0));
    } else if constexpr (D == KVDtype::kQ8_0) {
      // Lanes [0, 32 - w) from this block, the rest from the next one.
      const int w = c0 & 31;
      const uint8_t* blk = row + (c0 >> 5) * kQ8_0BlockBytes;
      const __mmask16 m1 = w <= 16 ? m : static_cast<__mmask16>(m & ((1u << (32 - w)) - 1u));
      const __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m1, blk + 2 + w))),
                                      _mm512_set1_ps(half_at(blk)));
      if (w <= 16) return v1;
      const __mmask16 m2 = static_cast<__mmask16>(m & ~m1);
      const uint8_t* nxt = blk + kQ8_0BlockBytes;
      const __m512 v2 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m2, nxt + 2 - (32 - w)))),
                        _mm512_set1_ps(half_at(nxt)));
      return _mm512_mask_mov_ps(v1, m2, v2);
    } else {
      const int w = c0 & 31;
      const uint8_t* blk = row + (c0 >> 5) * kQ4_0BlockBytes;
      if (w == 0 || w == 16) {
        // Elements 0-15 are the low nibbles of the 16 code bytes, 16-31 the high ones.
        __m128i b = _mm_maskz_loadu_epi8(m, blk + 2);
        if (w == 16) b = _mm_srli_epi16(b, 4);
        b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
        const __m512i qi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(b), _mm512_set1_epi32(8));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(qi), _mm512_set1_ps(half_at(blk)));
      }
      alignas(64) float tmp[16] = {};
      const int n = __builtin_popcount(static_cast<unsigned>(m));
      dequantize_q4_0_range(row, c0, n, tmp);
      return _mm512_maskz_load_ps(m, tmp);
    }
  }
};

template <class LoadK, class LoadV>
bool attend_dispatch(const float* q, const LoadK& k, const LoadV& v, int hd, int len, float scale, float* p,
                     float* out) {
  switch ((hd + 15) / 16) {
    case 1:
      attend_keys<1>(q, k, v, hd, len, scale, p, out);
      return true;
    case 2:
      attend_keys<2>(q, k, v, hd, len, scale, p, out);
      return true;
    case 3:
      attend_keys<3>(q, k, v, hd, len, scale, p, out);
      return true;
    case 4:
      attend_keys<4>(q, k, v, hd, len, scale, p, out);
      return true;
    case 5:
      attend_keys<5>(q, k, v, hd, len, scale, p, out);
      return true;
    case 8:
      attend_keys<8>(q, k, v, hd, len, scale, p, out);
      return true;
    default:
      return false;  // other widths: the portable path
  }
}

#define KVSCOPE_ATTEND_CHUNKS 1
constexpr int kAttendColAlign = 1;  // any slice start

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

using simd::hsum;

// NC 8-float chunks per head slice (hd = 8 NC): the query and the output
// accumulators live in registers. `load(j, c)` returns chunk c of key (or
// value) row j: a plain load for f32 rows, a conversion / dequantization in
// registers for f16 and quantized ones. Every layout runs the same
// arithmetic in the same order (as the AVX-512 path).
template <int NC, class LoadK, class LoadV>
void attend_keys(const float* q, const LoadK& load_k, const LoadV& load_v, int len, float scale, float* p, float* out) {
  __m256 qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = _mm256_loadu_ps(q + 8 * c);
  // Scores, four keys per pass (four independent FMA chains).
  int j = 0;
  for (; j + 4 <= len; j += 4) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < NC; ++c) {
      a0 = _mm256_fmadd_ps(load_k(j, c), qv[c], a0);
      a1 = _mm256_fmadd_ps(load_k(j + 1, c), qv[c], a1);
      a2 = _mm256_fmadd_ps(load_k(j + 2, c), qv[c], a2);
      a3 = _mm256_fmadd_ps(load_k(j + 3, c), qv[c], a3);
    }
    p[j] = hsum(a0) * scale;
    p[j + 1] = hsum(a1) * scale;
    p[j + 2] = hsum(a2) * scale;
    p[j + 3] = hsum(a3) * scale;
  }
  for (; j < len; ++j) {
    __m256 a0 = _mm256_setzero_ps();
    for (int c = 0; c < NC; ++c) a0 = _mm256_fmadd_ps(load_k(j, c), qv[c], a0);
    p[j] = hsum(a0) * scale;
  }
  softmax(p, len);
  // Weighted values, two keys per pass into separate accumulators.
  __m256 o0[NC], o1[NC];
  for (int c = 0; c < NC; ++c) o0[c] = o1[c] = _mm256_setzero_ps();
  for (j = 0; j + 2 <= len; j += 2) {
    const __m256 p0 = _mm256_set1_ps(p[j]), p1 = _mm256_set1_ps(p[j + 1]);
    for (int c = 0; c < NC; ++c) {
      o0[c] = _mm256_fmadd_ps(p0, load_v(j, c), o0[c]);
      o1[c] = _mm256_fmadd_ps(p1, load_v(j + 1, c), o1[c]);
    }
  }
  if (j < len) {
    const __m256 p0 = _mm256_set1_ps(p[j]);
    for (int c = 0; c < NC; ++c) o0[c] = _mm256_fmadd_ps(p0, load_v(j, c), o0[c]);
  }
  for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + 8 * c, _mm256_add_ps(o0[c], o1[c]));
}

// Contiguous f32 rows (`stride` floats apart).
struct LoadContiguous {
  const float* base;
  int64_t stride;
  __m256 operator()(int j, int c) const { return _mm256_loadu_ps(base + j * stride + 8 * c); }
};

// One row pointer per key; values [col + 8c, col + 8c + 8) of the row. With
// col a multiple of 8 a chunk lies inside one 32-value block.
template <KVDtype D>
struct LoadRows {
  const uint8_t* const* rows;
  int col;
  __m256 operator()(int j, int c) const {
    const uint8_t* row = rows[j];
    const int c0 = col + 8 * c;
    if constexpr (D == KVDtype::kF32) {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c0);
    } else if constexpr (D == KVDtype::kF16) {
      return _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + c0)));
    } else {
      const int w = c0 & 31;
      const bool q8 = D == KVDtype::kQ8_0;
      const uint8_t* blk = row + (c0 >> 5) * (q8 ? kQ8_0BlockBytes : kQ4_0BlockBytes);
      uint16_t h;
      std::memcpy(&h, blk, 2);
      const __m256 d = _mm256_set1_ps(f16_to_f32(h));
      __m256i qi;
      if (q8) {
        qi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + w)));
      } else {
        // Elements 0-15 are the low nibbles of the 16 code bytes, 16-31 the high ones.
        __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + (w & 15)));
        if (w >= 16) b = _mm_srli_epi16(b, 4);
        b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
        qi = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b), _mm256_set1_epi32(8));
      }
      return _mm256_mul_ps(_mm256_cvtepi32_ps(qi), d);
    }
  }
};

// Head widths that are whole 8-float chunks, up to 128; others take the portable path.
template <class LoadK, class LoadV>
bool attend_dispatch(const float* q, const LoadK& k, const LoadV& v, int hd, int len, float scale, float* p,
                     float* out) {
  if (hd % 8 != 0) return false;
  switch (hd / 8) {
    case 1:
      attend_keys<1>(q, k, v, len, scale, p, out);
      return true;
    case 2:
      attend_keys<2>(q, k, v, len, scale, p, out);
      return true;
    case 4:
      attend_keys<4>(q, k, v, len, scale, p, out);
      return true;
    case 5:
      attend_keys<5>(q, k, v, len, scale, p, out);
      return true;
    case 6:
      attend_keys<6>(q, k, v, len, scale, p, out);
      return true;
    case 8:
      attend_keys<8>(q, k, v, len, scale, p, out);
      return true;
    case 16:
      attend_keys<16>(q, k, v, len, scale, p, out);
      return true;
    default:
      return false;
  }
}

#define KVSCOPE_ATTEND_CHUNKS 1
constexpr int kAttendColAlign = 8;  // quantized slices start on a chunk (so a chunk lies inside a block)

#endif

// Every build's fallback (the portable build's only path, and head widths
// the vector paths do not take): per key, eight values of the head's slice
// at a time are converted (dequantized) into a register-sized chunk, then
// fixed-order dot products and sums, identical for every layout.
template <class Deq>
void attend_portable(const float* q, const Deq& deq, int hd, int len, float scale, float* p, float* out) {
  float b[8];
  for (int j = 0; j < len; ++j) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < hd; i += 8) {
      const int n = std::min(8, hd - i);
      deq(j, 0, i, n, b);
      for (int t = 0; t < n; ++t) acc[t] += b[t] * q[i + t];
    }
    p[j] = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) * scale;
  }
  softmax(p, len);
  std::fill(out, out + hd, 0.0f);
  for (int j = 0; j < len; ++j) {
    const float w = p[j];
    for (int i = 0; i < hd; i += 8) {
      const int n = std::min(8, hd - i);
      deq(j, 1, i, n, b);
      for (int t = 0; t < n; ++t) out[i + t] += w * b[t];
    }
  }
}

void dequantize_slice(KVDtype d, const uint8_t* row, int col, int n, float* out) {
  switch (d) {
    case KVDtype::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(row) + col, static_cast<size_t>(n) * 4);
      return;
    case KVDtype::kF16:
      dequantize_row_f16(reinterpret_cast<const uint16_t*>(row) + col, n, out);
      return;
    case KVDtype::kQ8_0:
      dequantize_q8_0_range(row, col, n, out);
      return;
    case KVDtype::kQ4_0:
      dequantize_q4_0_range(row, col, n, out);
      return;
  }
}

}  // namespace

void attend(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale, float* p,
            float* out) {
#ifdef KVSCOPE_ATTEND_CHUNKS
  if (attend_dispatch(q, LoadContiguous{K, stride}, LoadContiguous{V, stride}, hd, len, scale, p, out)) return;
#endif
  attend_portable(
      q,
      [&](int j, int kv, int i, int n, float* dst) {
        const float* src = (kv ? V : K) + j * stride + i;
        std::copy(src, src + n, dst);
      },
      hd, len, scale, p, out);
}

#ifdef KVSCOPE_ATTEND_CHUNKS
template <KVDtype D>
bool attend_rows_vector(const float* q, const KVRowsView& rows, int hd, int len, float scale, float* p, float* out) {
  const bool blocks = D == KVDtype::kQ8_0 || D == KVDtype::kQ4_0;
  return (!blocks || rows.col % kAttendColAlign == 0) &&
         attend_dispatch(q, LoadRows<D>{rows.k, rows.col}, LoadRows<D>{rows.v, rows.col}, hd, len, scale, p, out);
}
#endif

void attend_rows(const float* q, const KVRowsView& rows, int hd, int len, float scale, float* p, float* out) {
#ifdef KVSCOPE_ATTEND_CHUNKS
  using D = KVDtype;
  const auto vector = rows.dtype == D::kF32    ? attend_rows_vector<D::kF32>
                      : rows.dtype == D::kF16  ? attend_rows_vector<D::kF16>
                      : rows.dtype == D::kQ8_0 ? attend_rows_vector<D::kQ8_0>
                                               : attend_rows_vector<D::kQ4_0>;
  if (vector(q, rows, hd, len, scale, p, out)) return;
#endif
  attend_portable(
      q,
      [&](int j, int kv, int i, int n, float* dst) {
        dequantize_slice(rows.dtype, (kv ? rows.v : rows.k)[j], rows.col + i, n, dst);
      },
      hd, len, scale, p, out);
}

}  // namespace kvscope
