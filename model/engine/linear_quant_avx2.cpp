// quant_rows_avx2 (linear_quant.h): AVX2+FMA direct kernels for every GGUF
// quantized type. A decoder per type hands its block to the product as
// registers of 8 f32 weights (each decoded as dequantize_row does, with the
// same roundings), and the product multiply-adds each register with the 8
// matching inputs of every position (up to kQuantDirectN accumulators).
#include "model/engine/linear_quant.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>
// GCC 12 reports its own _mm512_undefined_ps() inside inlined AVX-512
// intrinsics (_mm512_reduce_add_ps) as uninitialized (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>
#include <stdexcept>

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

// Each decoder calls f(k, w) for each run of 32 weights k..k+31 of its
// block, w[c] holding weights k + 8c..k + 8c + 7 as f32. kGroup: the most
// positions one pass over a row multiplies (more spill registers).
using W32 = __m256[4];

struct Q8_0 {
  static constexpr int kSize = 32, kBytes = 34, kGroup = 8;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b));
    W32 w;
    for (int c = 0; c < 4; ++c) w[c] = _mm256_mul_ps(to_ps(i8x8(b + 2 + 8 * c)), d);
    f(0, w);
  }
};

// Q4_0 and Q5_0: w = d (q - 8), d (q - 16).
template <bool kFive>
struct QSym {
  static constexpr int kSize = 32, kBytes = kFive ? 22 : 18, kGroup = 8;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b));
    uint32_t qh = 0;
    if (kFive) std::memcpy(&qh, b + 2, 4);
    const uint8_t* qs = b + (kFive ? 6 : 2);
    const __m256i offset = _mm256_set1_epi32(kFive ? 16 : 8);
    W32 w;
    for (int c = 0; c < 4; ++c) {
      __m256i q = nibbles8(qs, c);
      if (kFive) q = _mm256_or_si256(q, fifth_bits8(qh, c));
      w[c] = _mm256_mul_ps(to_ps(_mm256_sub_epi32(q, offset)), d);
    }
    f(0, w);
  }
};

// Q4_1 and Q5_1: w = d q + m.
template <bool kFive>
struct QMin {
  static constexpr int kSize = 32, kBytes = kFive ? 24 : 20, kGroup = 8;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const __m256 d = _mm256_set1_ps(half_at(b)), m = _mm256_set1_ps(half_at(b + 2));
    uint32_t qh = 0;
    if (kFive) std::memcpy(&qh, b + 4, 4);
    const uint8_t* qs = b + (kFive ? 8 : 4);
    W32 w;
    for (int c = 0; c < 4; ++c) {
      __m256i q = nibbles8(qs, c);
      if (kFive) q = _mm256_or_si256(q, fifth_bits8(qh, c));
      w[c] = _mm256_add_ps(_mm256_mul_ps(to_ps(q), d), m);
    }
    f(0, w);
  }
};

// 32 bytes as 4 registers of 8 signed / unsigned 32-bit lanes, as f32.
inline void widen32(__m256i v, bool is_signed, __m256 (&out)[4]) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int c = 0; c < 4; ++c)
    out[c] = to_ps(is_signed ? _mm256_cvtepi8_epi32(parts[c]) : _mm256_cvtepu8_epi32(parts[c]));
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Q4_K and Q5_K: sub-block k (weights 32k..) has w = d s_k q - dmin m_k; its
// nibbles are the low (k even) or high halves of bytes 32 (k / 2).., its
// fifth bits bit k of qh bytes 0..31 (gguf_types.cpp's layout). The bit
// work is done on 32 bytes at once, then widened.
template <bool kFive>
struct QK45 {
  static constexpr int kSize = 256, kBytes = kFive ? 176 : 144, kGroup = 4;  // (8: slower, measured)
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* s = b + 4;
    const uint8_t* qs = b + (kFive ? 48 : 16);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i qh = kFive ? load32(b + 16) : _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const int scale = k < 4 ? s[k] & 63 : (s[k + 4] & 0x0F) | ((s[k - 4] >> 6) << 4);
      const int min = k < 4 ? s[k + 4] & 63 : (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
      const __m256 ds = _mm256_set1_ps(d * static_cast<float>(scale));
      const __m256 dm = _mm256_set1_ps(dmin * static_cast<float>(min));
      const __m256i src = load32(qs + 32 * (k / 2));
      __m256i q = _mm256_and_si256(k % 2 == 0 ? src : _mm256_srli_epi16(src, 4), m4);
      if (kFive) {
        const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(k)), _mm256_set1_epi8(1));
        q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));  // (bit <= 1: stays in its byte)
      }
      W32 w;
      widen32(q, false, w);
      for (__m256& v : w) v = _mm256_sub_ps(_mm256_mul_ps(v, ds), dm);
      f(32 * k, w);
    }
  }
};

// Q6_K: weight 128h + 32g + l has its nibble in ql byte 64h + 32(g % 2) + l
// (low for g < 2), its top bits at bits 2g of qh byte 32h + l, and
// w = d scales[i / 16] (q - 32): a run of 32 weights is 32 consecutive
// bytes of ql and of qh, decoded as bytes, then widened.
struct Q6K {
  static constexpr int kSize = 256, kBytes = 210, kGroup = 8;
  template <class F>
  static void decode(const uint8_t* b, F&& f) {
    const float d = half_at(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = load32(b + 128 + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const __m256i src = load32(b + 64 * h + 32 * (g % 2));
        const __m256i nib = _mm256_and_si256(g < 2 ? src : _mm256_srli_epi16(src, 4), m4);
        const __m256i top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), m2);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib, _mm256_slli_epi16(top, 4)), k32);  // -32..31
        const int i = 128 * h + 32 * g;
        const __m256 ds = _mm256_set1_ps(d * static_cast<float>(scales[i / 16]));
        const __m256 ds2 = _mm256_set1_ps(d * static_cast<float>(scales[i / 16 + 1]));  // weights 16..31 of the run
        W32 w;
        widen32(q, true, w);
        for (int c = 0; c < 4; ++c) w[c] = _mm256_mul_ps(w[c], c < 2 ? ds : ds2);
        f(i, w);
      }
    }
  }
};

// One row times NB positions: sums[p] = the row's dot product with position
// p. Few positions are few chains of dependent multiply-adds (an FMA's
// latency is 4 cycles): the registers of a run go to kSets sets of
// accumulators, so several chains are in flight whatever NB is. Where the
// build has AVX-512 the accumulators are 16 lanes wide (two decoded
// registers joined): half the multiply-adds and input loads per position.
#ifdef __AVX512F__
using Acc = __m512;
constexpr int kAccPerRun = 2;
inline Acc join(__m256 a, __m256 b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
}
inline Acc acc_zero() {
  return _mm512_setzero_ps();
}
inline Acc acc_add(Acc a, Acc b) {
  return _mm512_add_ps(a, b);
}
inline float acc_sum(Acc v) {
  return _mm512_reduce_add_ps(v);
}
template <int NB, int kSets>
inline void fma_run(const W32& w, const float* x, int64_t ldx, Acc (&acc)[kSets][NB]) {
  const Acc w0 = join(w[0], w[1]), w1 = join(w[2], w[3]);
  for (int p = 0; p < NB; ++p) {
    const float* xp = x + p * ldx;
    acc[0][p] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xp), acc[0][p]);
    acc[1 % kSets][p] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xp + 16), acc[1 % kSets][p]);
  }
}
#else
using Acc = __m256;
constexpr int kAccPerRun = 4;
inline Acc acc_zero() {
  return _mm256_setzero_ps();
}
inline Acc acc_add(Acc a, Acc b) {
  return _mm256_add_ps(a, b);
}
inline float acc_sum(Acc v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
template <int NB, int kSets>
inline void fma_run(const W32& w, const float* x, int64_t ldx, Acc (&acc)[kSets][NB]) {
  for (int p = 0; p < NB; ++p) {
    const float* xp = x + p * ldx;
    acc[0][p] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xp), acc[0][p]);
    acc[1 % kSets][p] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xp + 8), acc[1 % kSets][p]);
    acc[2 % kSets][p] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xp + 16), acc[2 % kSets][p]);
    acc[3 % kSets][p] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xp + 24), acc[3 % kSets][p]);
  }
}
#endif

template <class T, int NB>
void row_dot(const uint8_t* row, int64_t cols, const float* X, int64_t ldx, float* sums) {
  constexpr int kSets = NB == 1 ? kAccPerRun : NB <= 3 ? 2 : 1;
  Acc acc[kSets][NB];
  for (auto& set : acc)
    for (Acc& a : set) a = acc_zero();
  for (int64_t j = 0; j < cols / T::kSize; ++j) {
    const float* xb = X + j * T::kSize;
    T::decode(row + j * T::kBytes, [&](int k, const W32& w) { fma_run<NB, kSets>(w, xb + k, ldx, acc); });
  }
  for (int p = 0; p < NB; ++p) {
    Acc total = acc[0][p];
    for (int s = 1; s < kSets; ++s) total = acc_add(total, acc[s][p]);
    sums[p] = acc_sum(total);
  }
}

// Several positions: a block of kRowBlock rows at a time, its columns in
// chunks of about kChunkCols, so the chunk of every position's inputs (8 x
// 512 floats = 16 KiB) stays in L1 while each row of the block is
// multiplied with it (whole rows would reread all the inputs, 24 KiB and
// more, from L2 for every row). One position reads 3 KiB a row: whole rows.
constexpr int64_t kRowBlock = 32, kChunkCols = 512;

template <class T>
void rows_direct(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  using Kernel = void (*)(const uint8_t*, int64_t, const float*, int64_t, float*);
  static constexpr Kernel kKernels[kQuantDirectN + 1] = {nullptr,       row_dot<T, 1>, row_dot<T, 2>,
                                                         row_dot<T, 3>, row_dot<T, 4>, row_dot<T, 5>,
                                                         row_dot<T, 6>, row_dot<T, 7>, row_dot<T, 8>};
  const int64_t chunk = n == 1 ? W.cols : std::max<int64_t>(T::kSize, kChunkCols / T::kSize * T::kSize);
  float sums[kQuantDirectN], acc[kRowBlock][kQuantDirectN];
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t m = std::min(kRowBlock, r1 - rb);
    for (int64_t p0 = 0; p0 < n; p0 += T::kGroup) {
      const int64_t np = std::min<int64_t>(T::kGroup, n - p0);
      for (int64_t c0 = 0; c0 < W.cols; c0 += chunk) {
        const int64_t kc = std::min(chunk, W.cols - c0);
        for (int64_t i = 0; i < m; ++i) {
          kKernels[np](W.blocks + (rb + i) * W.row_bytes + c0 / T::kSize * T::kBytes, kc, X + p0 * ldx + c0, ldx, sums);
          for (int64_t p = 0; p < np; ++p) acc[i][p] = (c0 == 0 ? 0.0f : acc[i][p]) + sums[p];
        }
      }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < np; ++p) Y[(p0 + p) * ldy + rb + i] = acc[i][p] + (b ? b[rb + i] : 0.0f);
    }
  }
}

template <class T>
void decode_row(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t j = 0; j < cols / T::kSize; ++j)
    T::decode(row + j * T::kBytes, [&](int k, const W32& w) {
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + j * T::kSize + k + 8 * c, w[c]);
    });
}

// Calls f with the type's decoder as its argument's type (T{}).
template <class F>
void with_decoder(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::kQ8_0:
      return f(Q8_0{});
    case GgmlType::kQ4_0:
      return f(QSym<false>{});
    case GgmlType::kQ5_0:
      return f(QSym<true>{});
    case GgmlType::kQ4_1:
      return f(QMin<false>{});
    case GgmlType::kQ5_1:
      return f(QMin<true>{});
    case GgmlType::kQ4_K:
      return f(QK45<false>{});
    case GgmlType::kQ5_K:
      return f(QK45<true>{});
    case GgmlType::kQ6_K:
      return f(Q6K{});
    default:
      throw std::logic_error("quantized kernels: not a quantized type");
  }
}

}  // namespace

void quant_decode_row(GgmlType type, const uint8_t* row, int64_t cols, float* out) {
  with_decoder(type, [&](auto t) { decode_row<decltype(t)>(row, cols, out); });
}

void quant_rows_avx2(const QuantView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                     int64_t r0, int64_t r1) {
  with_decoder(W.type, [&](auto t) { rows_direct<decltype(t)>(W, X, n, ldx, b, Y, ldy, r0, r1); });
}

}  // namespace linear_detail
}  // namespace kvscope

#endif  // __AVX2__ && __FMA__
