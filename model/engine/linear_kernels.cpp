// linear_rows (linear_kernels.h): the AVX-512 panel kernel and the portable paths.
#include "model/engine/linear_kernels.h"

#include <algorithm>

#include <Eigen/Core>

#include "model/core/index_check.h"
#include "model/engine/linear_elements.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#include <immintrin.h>
#define KVSCOPE_LINEAR_AVX512 1
// GCC 12 reports its own _mm512_undefined_ps() inside inlined AVX-512
// intrinsics as uninitialized (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace kvscope {
namespace linear_detail {

namespace {

// ---------------------------------------------------------------------------
// Portable path: blocks of R weight rows x NB positions, accumulators as
// arrays of kLanes floats that the compiler keeps in vector registers of any
// width (4 lanes on simd128/SSE, 8 on AVX2).
constexpr int kLanes = 16;

template <typename T, int R, int NB>
void generic_block(const T* w, int64_t ldw, int64_t cols, const float* X, int64_t ldx, const float* b, float* Y,
                   int64_t ldy, int64_t r) {
  float acc[R][NB][kLanes] = {};
  float wv[R][kLanes];
  const int64_t full = cols - cols % kLanes;
  for (int64_t k = 0; k < full; k += kLanes) {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < kLanes; ++j) wv[i][j] = to_f32(w[i * ldw + k + j]);
    for (int p = 0; p < NB; ++p) {
      const float* x = X + p * ldx + k;
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < kLanes; ++j) acc[i][p][j] += wv[i][j] * x[j];
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int p = 0; p < NB; ++p) {
      float s = 0;
      for (int j = 0; j < kLanes; ++j) s += acc[i][p][j];
      const float* x = X + p * ldx;
      for (int64_t k = full; k < cols; ++k) s += to_f32(w[i * ldw + k]) * x[k];
      Y[p * ldy + r + i] = s + (b ? b[r + i] : 0.0f);
    }
  }
}

template <typename T>
void generic_rows(const T* W, int64_t ldw, int64_t cols, const float* X, int64_t n, int64_t ldx, const float* b,
                  float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    int64_t p = 0;
    for (; p + 4 <= n; p += 4) generic_block<T, 4, 4>(W + r * ldw, ldw, cols, X + p * ldx, ldx, b, Y + p * ldy, ldy, r);
    for (; p < n; ++p) generic_block<T, 4, 1>(W + r * ldw, ldw, cols, X + p * ldx, ldx, b, Y + p * ldy, ldy, r);
  }
  for (; r < r1; ++r) {
    int64_t p = 0;
    for (; p + 4 <= n; p += 4) generic_block<T, 1, 4>(W + r * ldw, ldw, cols, X + p * ldx, ldx, b, Y + p * ldy, ldy, r);
    for (; p < n; ++p) generic_block<T, 1, 1>(W + r * ldw, ldw, cols, X + p * ldx, ldx, b, Y + p * ldy, ldy, r);
  }
}

#ifdef KVSCOPE_LINEAR_AVX512
// ---------------------------------------------------------------------------
// AVX-512: 16 weights per load, converted in registers.
inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const F16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16(const Bf16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline __m512 load16(const F16* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load16(const Bf16* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// ---------------------------------------------------------------------------
// Panels (weight_matrix.h): for each column k the panel's m <= 32 weights are
// two 16-lane loads, converted once; each position's x[k] is broadcast and
// FMA'd into 2 accumulators (rows 0-15 and 16-31), summed into Y at the end
// of each kPanelKc-column chunk. An output's order of additions depends on
// cols and on whether its group of positions has <= 4 or more (below), not on
// the thread split. A software prefetch kPanelPrefetch columns ahead keeps
// the weights streaming from memory while the multiply-adds of a batch run
// (without it, 5 positions cost 1.75 decode steps instead of 1.2 in a
// single-thread A/B on GPT-2-124M F16 shapes, measured once while writing it).

// One column k of a panel into one set of accumulators (Full: m == 32).
template <typename T, int NB, bool Full>
inline void panel_column(const T* w, int64_t m, const float* x, int64_t ldx, __mmask16 m0, __mmask16 m1,
                         __m512 (&acc)[NB][2]) {
  _mm_prefetch(reinterpret_cast<const char*>(w + kPanelPrefetch * m), _MM_HINT_T0);
  if constexpr (sizeof(T) == 4) _mm_prefetch(reinterpret_cast<const char*>(w + kPanelPrefetch * m + 16), _MM_HINT_T0);
  __m512 w0, w1;
  if constexpr (Full) {
    w0 = load16(w), w1 = load16(w + 16);
  } else {
    w0 = load16(w, m0), w1 = load16(w + 16, m1);
  }
  for (int p = 0; p < NB; ++p) {
    const __m512 xb = _mm512_set1_ps(x[p * ldx]);
    acc[p][0] = _mm512_fmadd_ps(w0, xb, acc[p][0]);
    acc[p][1] = _mm512_fmadd_ps(w1, xb, acc[p][1]);
  }
}

// Up to 4 positions, columns alternate between two sets of accumulators (the
// FMA's latency: one position is only 2 chains); from 5 on, one set (10-16
// chains, and no room in 32 registers for two).
template <typename T, int NB, bool Full>
void panel_group(const T* P, int64_t m, int64_t kc, const float* X, int64_t ldx, float* Y, int64_t ldy, const float* b,
                 __mmask16 m0, __mmask16 m1, bool first) {
  constexpr bool kTwoSets = NB <= 4;
  __m512 a0[NB][2], a1[kTwoSets ? NB : 1][2];
  for (int p = 0; p < NB; ++p) a0[p][0] = a0[p][1] = _mm512_setzero_ps();
  for (auto& a : a1) a[0] = a[1] = _mm512_setzero_ps();
  int64_t k = 0;
  if constexpr (kTwoSets) {
    for (; k + 2 <= kc; k += 2) {
      panel_column<T, NB, Full>(P + k * m, m, X + k, ldx, m0, m1, a0);
      panel_column<T, NB, Full>(P + (k + 1) * m, m, X + k + 1, ldx, m0, m1, a1);
    }
  }
  for (; k < kc; ++k) panel_column<T, NB, Full>(P + k * m, m, X + k, ldx, m0, m1, a0);
  __m512 b0 = _mm512_setzero_ps(), b1 = b0;
  if (first && b) {
    b0 = _mm512_maskz_loadu_ps(m0, b);
    b1 = _mm512_maskz_loadu_ps(m1, b + 16);
  }
  for (int p = 0; p < NB; ++p) {
    float* y = Y + p * ldy;
    __m512 y0 = a0[p][0], y1 = a0[p][1];
    if constexpr (kTwoSets) y0 = _mm512_add_ps(y0, a1[p][0]), y1 = _mm512_add_ps(y1, a1[p][1]);
    _mm512_mask_storeu_ps(y, m0, _mm512_add_ps(y0, first ? b0 : _mm512_maskz_loadu_ps(m0, y)));
    _mm512_mask_storeu_ps(y + 16, m1, _mm512_add_ps(y1, first ? b1 : _mm512_maskz_loadu_ps(m1, y + 16)));
  }
}

template <typename T>
void panel_rows(const T* W, int64_t rows, int64_t cols, const float* X, int64_t n, int64_t ldx, const float* b,
                float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  using Group = void (*)(const T*, int64_t, int64_t, const float*, int64_t, float*, int64_t, const float*, __mmask16,
                         __mmask16, bool);
  constexpr Group kGroups[2][kPanelGroup + 1] = {
      {nullptr, panel_group<T, 1, false>, panel_group<T, 2, false>, panel_group<T, 3, false>, panel_group<T, 4, false>,
       panel_group<T, 5, false>, panel_group<T, 6, false>, panel_group<T, 7, false>, panel_group<T, 8, false>},
      {nullptr, panel_group<T, 1, true>, panel_group<T, 2, true>, panel_group<T, 3, true>, panel_group<T, 4, true>,
       panel_group<T, 5, true>, panel_group<T, 6, true>, panel_group<T, 7, true>, panel_group<T, 8, true>}};
  walk_panels(rows, cols, n, r0, r1, [&](int64_t r, int64_t m, int64_t k0, int64_t kc, int64_t p, int64_t np) {
    const __mmask16 m0 = static_cast<__mmask16>(m >= 16 ? 0xffffu : (1u << m) - 1u);
    const __mmask16 m1 = static_cast<__mmask16>(m >= 32 ? 0xffffu : m > 16 ? (1u << (m - 16)) - 1u : 0u);
    const T* P = W + r * cols + k0 * m;  // the chunk of the panel's (cols, m)
    kGroups[m == kPanelRows][np](P, m, kc, X + p * ldx + k0, ldx, Y + p * ldy + r, ldy, b ? b + r : nullptr, m0, m1,
                                 k0 == 0);
  });
}
#endif  // KVSCOPE_LINEAR_AVX512

// Panels without AVX-512 or SIMD128 (only tests build them there): the
// exact chunk loop over every chunk.
template <typename T>
void panel_rows_plain(const T* W, int64_t rows, int64_t cols, const float* X, int64_t n, int64_t ldx, const float* b,
                      float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  walk_panels(rows, cols, n, r0, r1, [&](int64_t r, int64_t m, int64_t k0, int64_t kc, int64_t p, int64_t np) {
    panel_chunk_exact(W + r * cols + k0 * m, m, kc, X + p * ldx + k0, ldx, np, Y + p * ldy + r, ldy,
                      b ? b + r : nullptr, k0 == 0);
  });
}

}  // namespace

void rows_panels(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  // A share must start on a panel and end on one (or at the last row): the
  // kernel computes whole panels.
  KVSCOPE_CHECK_INDEX("panel share start r0 % kPanelRows", r0 % kPanelRows, 1);
  KVSCOPE_CHECK_INDEX("panel share end r1 % kPanelRows", r1 == W.rows ? 0 : r1 % kPanelRows, 1);
#ifdef KVSCOPE_LINEAR_AVX512
  with_type(W.dtype, W.data, [&](auto* w) { panel_rows(w, W.rows, W.cols, X, n, ldx, b, Y, ldy, r0, r1); });
#elif defined(__wasm_simd128__)
  rows_panels_simd128(W, X, n, ldx, b, Y, ldy, r0, r1);
#else
  with_type(W.dtype, W.data, [&](auto* w) { panel_rows_plain(w, W.rows, W.cols, X, n, ldx, b, Y, ldy, r0, r1); });
#endif
}

void rows_generic(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  with_type(W.dtype, W.data, [&](auto* w) { generic_rows(w, W.stride(), W.cols, X, n, ldx, b, Y, ldy, r0, r1); });
}

// Many positions on row-major weights: each block of kLinearRowBlock W rows is
// converted once into a thread_local f32 buffer (cols x kLinearRowBlock floats, never the
// whole matrix) and multiplied by Eigen's register-blocked GEMM. Blocks start
// at multiples of kLinearRowBlock, so the result does not depend on the split.
void rows_packed(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  using Rows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strided = Eigen::OuterStride<Eigen::Dynamic>;
  thread_local Rows block;  // (m, cols)
  const Eigen::Map<const Rows, 0, Strided> x(X, n, W.cols, Strided(ldx));
  with_type(W.dtype, W.data, [&](auto* w) {
    for (int64_t r = r0; r < r1;) {
      const int64_t m = std::min(r1, (r / kLinearRowBlock + 1) * kLinearRowBlock) - r;
      block.resize(m, W.cols);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t k = 0; k < W.cols; ++k) block(i, k) = to_f32(w[(r + i) * W.stride() + k]);
      Eigen::Map<Rows, 0, Strided> y(Y + r, n, m, Strided(ldy));
      y.noalias() = x * block.transpose();
      if (b) y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(b + r, m);
      r += m;
    }
  });
}

}  // namespace linear_detail

void linear_rows(const WeightView& W, const float* X, int64_t n, int64_t ldx, const float* b, float* Y, int64_t ldy,
                 int64_t r0, int64_t r1) {
  if (n <= 0 || r1 <= r0) return;
  if (W.panels) return linear_detail::rows_panels(W, X, n, ldx, b, Y, ldy, r0, r1);
  if (n > kDirectMaxN) return linear_detail::rows_packed(W, X, n, ldx, b, Y, ldy, r0, r1);
  linear_detail::rows_generic(W, X, n, ldx, b, Y, ldy, r0, r1);
}

}  // namespace kvscope
