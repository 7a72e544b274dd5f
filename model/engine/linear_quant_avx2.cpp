// quant_rows_avx2 (linear_quant.h): AVX2+FMA direct kernels for every GGUF
// quantized type. A decoder per type hands its block to the product as
// registers of 8 f32 weights (each decoded as dequantize_row does, with the
// same roundings), and the product multiply-adds each register with the 8
// matching inputs of every position (up to kQuantDirectN accumulators).
#include "model/engine/linear_quant.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <cstring>

#include "model/core/numeric.h"

namespace kvscope {
namespace linear_detail {
namespace {

float half_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// 8 bytes from p as 8 unsigned / signed 32-bit lanes.
inline __m256i u8x8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i i8x8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 to_ps(__m256i v) {
  return _mm256_cvtepi32_ps(v);
}

// The 4-bit quants of the legacy blocks: weight i < 16 in the low nibble of
// byte i, weight 16 + i in its high nibble (chunk c of 8 weights: c < 2 low).
inline __m256i nibbles8(const uint8_t* qs, int c) {
  const __m256i v = u8x8(qs + 8 * (c % 2));
  return c < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(v, 4);
}

// The fifth bits of weights 8c..8c+7 (bit i of the little-endian uint32 at qh), as 16 or 0.
inline __m256i fifth_bits8(uint32_t qh, int c) {
  const __m256i bits =
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh >> (8 * c))), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_slli_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(1)), 4);
}

// Each decoder calls f(k, w) for the block's weights k..k+7, w as f32.
struct Q8_0 {
  static constexpr int kSize = 32, kBytes = 34;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b));
    for (int c = 0; c < 4; ++c) f(8 * c, _mm256_mul_ps(to_ps(i8x8(b + 2 + 8 * c)), d));
  }
};

// Q4_0 and Q5_0: w = d (q - 8), d (q - 16).
template <bool kFive>
struct QSym {
  static constexpr int kSize = 32, kBytes = kFive ? 22 : 18;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b));
    uint32_t qh = 0;
    if (kFive) std::memcpy(&qh, b + 2, 4);
    const uint8_t* qs = b + (kFive ? 6 : 2);
    const __m256i offset = _mm256_set1_epi32(kFive ? 16 : 8);
    for (int c = 0; c < 4; ++c) {
      __m256i q = nibbles8(qs, c);
      if (kFive) q = _mm256_or_si256(q, fifth_bits8(qh, c));
      f(8 * c, _mm256_mul_ps(to_ps(_mm256_sub_epi32(q, offset)), d));
    }
  }
};

// Q4_1 and Q5_1: w = d q + m.
template <bool kFive>
struct QMin {
  static constexpr int kSize = 32, kBytes = kFive ? 24 : 20;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b)), m = _mm256_set1_ps(half_at(b + 2));
    uint32_t qh = 0;
    if (kFive) std::memcpy(&qh, b + 4, 4);
    const uint8_t* qs = b + (kFive ? 8 : 4);
    for (int c = 0; c < 4; ++c) {
      __m256i q = nibbles8(qs, c);
      if (kFive) q = _mm256_or_si256(q, fifth_bits8(qh, c));
      f(8 * c, _mm256_add_ps(_mm256_mul_ps(to_ps(q), d), m));
    }
  }
};

// Q4_K and Q5_K: sub-block k (weights 32k..) has w = d s_k q - dmin m_k; its
// nibbles are the low (k even) or high halves of bytes 32 (k / 2).., its
// fifth bits bit k of qh bytes 0..31 (gguf_types.cpp's layout).
template <bool kFive>
struct QK45 {
  static constexpr int kSize = 256, kBytes = kFive ? 176 : 144;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* s = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (kFive ? 48 : 16);
    for (int k = 0; k < 8; ++k) {
      const int scale = k < 4 ? s[k] & 63 : (s[k + 4] & 0x0F) | ((s[k - 4] >> 6) << 4);
      const int min = k < 4 ? s[k + 4] & 63 : (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
      const __m256 ds = _mm256_set1_ps(d * static_cast<float>(scale));
      const __m256 dm = _mm256_set1_ps(dmin * static_cast<float>(min));
      const uint8_t* src = qs + 32 * (k / 2);
      const __m128i shift = _mm_cvtsi32_si128(k);
      for (int c = 0; c < 4; ++c) {
        const __m256i v = u8x8(src + 8 * c);
        __m256i q = k % 2 == 0 ? _mm256_and_si256(v, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(v, 4);
        if (kFive) {
          const __m256i hb = _mm256_and_si256(_mm256_srl_epi32(u8x8(qh + 8 * c), shift), _mm256_set1_epi32(1));
          q = _mm256_or_si256(q, _mm256_slli_epi32(hb, 4));
        }
        f(32 * k + 8 * c, _mm256_sub_ps(_mm256_mul_ps(to_ps(q), ds), dm));
      }
    }
  }
};

// Q6_K: weight 128h + 32g + l has its nibble in ql byte 64h + 32(g % 2) + l
// (low for g < 2), its top bits at bits 2g of qh byte 32h + l, and
// w = d scales[i / 16] (q - 32).
struct Q6K {
  static constexpr int kSize = 256, kBytes = 210;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const float d = half_at(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h)
      for (int g = 0; g < 4; ++g) {
        const __m128i shift = _mm_cvtsi32_si128(2 * g);
        for (int c = 0; c < 4; ++c) {
          const int l = 8 * c, i = 128 * h + 32 * g + l;
          const __m256i low = u8x8(b + 64 * h + 32 * (g % 2) + l);
          const __m256i nib = g < 2 ? _mm256_and_si256(low, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(low, 4);
          const __m256i top =
              _mm256_and_si256(_mm256_srl_epi32(u8x8(b + 128 + 32 * h + l), shift), _mm256_set1_epi32(3));
          const __m256i q = _mm256_sub_epi32(_mm256_or_si256(nib, _mm256_slli_epi32(top, 4)), _mm256_set1_epi32(32));
          f(i, _mm256_mul_ps(to_ps(q), _mm256_set1_ps(d * static_cast<float>(scales[i / 16]))));
        }
      }
  }
};

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// One row times NB positions: sums[p] = the row's dot product with position p.
template <class T, int NB>
void row_dot(const uint8_t* row, int64_t cols, const float* X, int64_t ldx, float* sums) {
  __m256 acc[NB];
  for (int p = 0; p < NB; ++p) acc[p] = _mm256_setzero_ps();
  for (int64_t j = 0; j < cols / T::kSize; ++j) {
    const float* xb = X + j * T::kSize;
    T::decode(row + j * T::kBytes, [&](int k, __m256 w) {
      for (int p = 0; p < NB; ++p) acc[p] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xb + p * ldx + k), acc[p]);
    });
  }
  for (int p = 0; p < NB; ++p) sums[p] = hsum(acc[p]);
}

template <class T>
void rows_direct(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  using Kernel = void (*)(const uint8_t*, int64_t, const float*, int64_t, float*);
  static constexpr Kernel kKernels[kQuantDirectN + 1] = {nullptr,       row_dot<T, 1>, row_dot<T, 2>,
                                                         row_dot<T, 3>, row_dot<T, 4>, row_dot<T, 5>,
                                                         row_dot<T, 6>, row_dot<T, 7>, row_dot<T, 8>};
  float sums[kQuantDirectN];
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t p0 = 0; p0 < n; p0 += kQuantDirectN) {
      const int64_t np = n - p0 < kQuantDirectN ? n - p0 : kQuantDirectN;
      kKernels[np](W.blocks + r * W.row_bytes, W.cols, X + p0 * ldx, ldx, sums);
      for (int64_t p = 0; p < np; ++p) Y[(p0 + p) * ldy + r] = sums[p] + (b ? b[r] : 0.0f);
    }
}

}  // namespace

void quant_rows_avx2(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                     int64_t r0, int64_t r1) {
  switch (W.type) {
    case GgmlType::kQ8_0:
      return rows_direct<Q8_0>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ4_0:
      return rows_direct<QSym<false>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ5_0:
      return rows_direct<QSym<true>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ4_1:
      return rows_direct<QMin<false>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ5_1:
      return rows_direct<QMin<true>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ4_K:
      return rows_direct<QK45<false>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ5_K:
      return rows_direct<QK45<true>>(W, X, n, ldx, b, Y, ldy, r0, r1);
    case GgmlType::kQ6_K:
      return rows_direct<Q6K>(W, X, n, ldx, b, Y, ldy, r0, r1);
    default:
      return quant_rows_portable(W, X, n, ldx, b, Y, ldy, r0, r1);
  }
}

}  // namespace linear_detail
}  // namespace kvscope

#endif  // __AVX2__ && __FMA__
