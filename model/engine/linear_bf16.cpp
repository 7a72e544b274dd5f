// BF16 products (linear_kernels.h): activations rounded to bf16, multiplied
// by BF16 panels with AVX512_BF16's dot-product instruction.
#include <cstring>

#include "model/core/index_check.h"
#include "model/core/numeric.h"
#include "model/engine/linear_kernels.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define KVSCOPE_LINEAR_BF16_DOT 1
#endif

namespace kvscope {
namespace linear_detail {

void round_rows_to_bf16(const float* X, int64_t n, int64_t ldx, int64_t cols, uint16_t* out) {
  for (int64_t p = 0; p < n; ++p) {
    const float* x = X + p * ldx;
    uint16_t* o = out + p * cols;
    for (int64_t k = 0; k < cols; ++k) o[k] = f32_to_bf16(x[k]);
  }
}

#ifdef KVSCOPE_LINEAR_BF16_DOT
namespace {

// Rows of a panel in the accumulators' lanes. unpacklo/hi_epi16 of two
// columns interleave them within each 128-bit lane, so lane 4j + i of the
// "lo" dot products holds row 8j + i and of the "hi" ones row 8j + 4 + i;
// these indices (into lo, then hi = 16 + lane) put rows 0-15 and 16-31 back.
inline __m512i rows_0_15() {
  return _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
}
inline __m512i rows_16_31() {
  return _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
}

// acc + the pairwise products of w's and x's bf16 pairs (vdpbf16ps), as
// asm: around GCC 12's builtin the loop below stored every accumulator to
// the stack after each instruction; through asm they stay in registers.
inline __m512 dot_pairs(__m512 acc, __m512i w, __m512i x) {
  asm("vdpbf16ps {%2, %1, %0|%0, %1, %2}" : "+v"(acc) : "v"(w), "v"(x));
  return acc;
}

// Two columns of a panel, interleaved as the dot product's pairs: "lo" holds
// rows {0-3, 8-11, 16-19, 24-27}, "hi" the others (rows_0_15 above).
struct ColumnPair {
  __m512i lo, hi;
};
// Prefetch: a chunk's first group of positions reads the chunk from memory
// and fetches kPanelPrefetch columns ahead into L1 (next_chunk = 0); a later
// group reads it from L1 and meanwhile fetches the next chunk into L2: the
// same panel's columns next_chunk (= kc) on, which on a panel's last chunk
// are the next panel's first (panels lie one after another). So the memory
// keeps streaming while a later group computes (12 and 16 positions of a
// SmolLM2-135M-shaped forward: 6-7 % fewer decode steps; the f32 panels,
// compute-bound there on GPT-2, gained nothing).
template <bool Full>
inline ColumnPair column_pair(const uint16_t* w, int64_t m, __mmask32 mk, int64_t next_chunk) {
  if (next_chunk == 0) {
    _mm_prefetch(reinterpret_cast<const char*>(w + kPanelPrefetch * m), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + (kPanelPrefetch + 1) * m), _MM_HINT_T0);
  } else {
    _mm_prefetch(reinterpret_cast<const char*>(w + next_chunk * m), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(w + (next_chunk + 1) * m), _MM_HINT_T1);
  }
  const __m512i a = Full ? _mm512_loadu_si512(w) : _mm512_maskz_loadu_epi16(mk, w);
  const __m512i c = Full ? _mm512_loadu_si512(w + m) : _mm512_maskz_loadu_epi16(mk, w + m);
  return {_mm512_unpacklo_epi16(a, c), _mm512_unpackhi_epi16(a, c)};
}

// Columns k, k + 1 of a panel into one set of NB positions' accumulators:
// each position's (x[k], x[k + 1]) broadcast as one 32-bit lane and one
// dot-product instruction per 16 rows.
template <int NB, bool Full>
inline void pair_step(const uint16_t* P, int64_t k, int64_t m, __mmask32 mk, const uint16_t* X, int64_t ldx,
                      __m512 (&acc)[NB][2], int64_t next_chunk) {
  const ColumnPair w = column_pair<Full>(P + k * m, m, mk, next_chunk);
  for (int p = 0; p < NB; ++p) {
    int32_t x2;
    std::memcpy(&x2, X + p * ldx + k, 4);
    const __m512i xb = _mm512_set1_epi32(x2);
    acc[p][0] = dot_pairs(acc[p][0], w.lo, xb);
    acc[p][1] = dot_pairs(acc[p][1], w.hi, xb);
  }
}

// NB positions over kc (even) columns of one panel (m rows), added into Y
// (or, on the first chunk, the bias and the sum stored). Up to 4 positions,
// pairs of columns alternate between two sets of accumulators (the
// instruction's latency: one position is only 2 chains), as the f32 panels do.
template <int NB, bool Full>
void dot_group(const uint16_t* P, int64_t m, int64_t kc, const uint16_t* X, int64_t ldx, float* Y, int64_t ldy,
               const float* b, bool first, int64_t next_chunk) {
  constexpr bool kTwoSets = NB <= 4;
  const __mmask32 mk = Full ? ~0u : (1u << m) - 1u;
  const __mmask16 m0 = static_cast<__mmask16>(mk), m1 = static_cast<__mmask16>(mk >> 16);
  __m512 acc[NB][2], acc2[kTwoSets ? NB : 1][2];
  for (int p = 0; p < NB; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  for (auto& a : acc2) a[0] = a[1] = _mm512_setzero_ps();
  int64_t k = 0;
  if constexpr (kTwoSets) {
    for (; k + 4 <= kc; k += 4) {
      pair_step<NB, Full>(P, k, m, mk, X, ldx, acc, next_chunk);
      pair_step<NB, Full>(P, k + 2, m, mk, X, ldx, acc2, next_chunk);
    }
  }
  for (; k + 2 <= kc; k += 2) pair_step<NB, Full>(P, k, m, mk, X, ldx, acc, next_chunk);
  if constexpr (kTwoSets) {
    for (int p = 0; p < NB; ++p) {
      acc[p][0] = _mm512_add_ps(acc[p][0], acc2[p][0]);
      acc[p][1] = _mm512_add_ps(acc[p][1], acc2[p][1]);
    }
  }
  const __m512i i0 = rows_0_15(), i1 = rows_16_31();
  const __m512 b0 = first && b ? _mm512_maskz_loadu_ps(m0, b) : _mm512_setzero_ps();
  const __m512 b1 = first && b ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_setzero_ps();
  for (int p = 0; p < NB; ++p) {
    float* y = Y + p * ldy;
    const __m512 y0 = _mm512_permutex2var_ps(acc[p][0], i0, acc[p][1]);
    const __m512 y1 = _mm512_permutex2var_ps(acc[p][0], i1, acc[p][1]);
    _mm512_mask_storeu_ps(y, m0, _mm512_add_ps(y0, first ? b0 : _mm512_maskz_loadu_ps(m0, y)));
    _mm512_mask_storeu_ps(y + 16, m1, _mm512_add_ps(y1, first ? b1 : _mm512_maskz_loadu_ps(m1, y + 16)));
  }
}

}  // namespace

void rows_panels_bf16(const uint16_t* W, int64_t rows, int64_t cols, const uint16_t* X, int64_t n, int64_t ldx,
                      const float* b, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  KVSCOPE_CHECK_INDEX("panel share start r0 % 32", r0 % kPanelRows, 1);
  KVSCOPE_CHECK_INDEX("panel share end r1 % 32", r1 == rows ? 0 : r1 % kPanelRows, 1);
  KVSCOPE_CHECK_INDEX("bf16 panel columns cols % 2", cols % 2, 1);  // the instruction takes pairs
  using Group = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, float*, int64_t, const float*,
                         bool, int64_t);
  constexpr Group kGroups[2][kPanelGroup + 1] = {
      {nullptr, dot_group<1, false>, dot_group<2, false>, dot_group<3, false>, dot_group<4, false>, dot_group<5, false>,
       dot_group<6, false>, dot_group<7, false>, dot_group<8, false>},
      {nullptr, dot_group<1, true>, dot_group<2, true>, dot_group<3, true>, dot_group<4, true>, dot_group<5, true>,
       dot_group<6, true>, dot_group<7, true>, dot_group<8, true>}};
  walk_panels(rows, cols, n, r0, r1, [&](int64_t r, int64_t m, int64_t k0, int64_t kc, int64_t p, int64_t np) {
    const uint16_t* P = W + r * cols + k0 * m;  // the chunk of the panel's (cols, m)
    kGroups[m == kPanelRows][np](P, m, kc, X + p * ldx + k0, ldx, Y + p * ldy + r, ldy, b ? b + r : nullptr, k0 == 0,
                                 p == 0 ? 0 : kc);
  });
}
#endif  // KVSCOPE_LINEAR_BF16_DOT

}  // namespace linear_detail
}  // namespace kvscope
