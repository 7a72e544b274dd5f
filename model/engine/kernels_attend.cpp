// One query's attention over cached keys and values (kernels.h: attend,
// attend_runs). The keys come as runs of rows a fixed stride apart (a page of
// a paged cache, or one contiguous reservation): the kernel walks each run
// with a moving pointer, as over one dense array. One vector kernel, written
// once over an instruction-set traits struct (AVX-512: 16-float chunks with
// masked tails; AVX2: 8-float chunks), and a portable one; each dequantizes
// stored rows in registers and runs the same arithmetic in the same order for
// every layout.
#include <immintrin.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "model/core/exp_simd128.h"
#include "model/engine/kernels.h"  // IWYU pragma: associated
#include "model/engine/kernels_simd.h"
#include "model/kv/kv_quant.h"

namespace kvscope {
namespace {

// Softmax of p[0, len) in place, scaled: p[j] = exp(p[j] - max) / sum.
void softmax(float* p, int len) {
  Eigen::Map<Eigen::ArrayXf> a(p, len);
#ifdef __wasm_simd128__
  a -= a.maxCoeff();
  exp_in_place_simd128(p, len);  // (Eigen's exp is scalar expf there)
#else
  a = (a - a.maxCoeff()).exp();
#endif
  a *= 1.0f / a.sum();
}

// The runs of one head's keys: run r's row i at runs[r].k + i * stride.
struct Runs {
  const KVRowRun* runs;
  int n_runs;
  size_t stride;
};

#if (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)) || \
    (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#define KVSCOPE_ATTEND_CHUNKS 1

// A block's fp16 scale, converted by the F16C instruction.
inline float block_scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _cvtsh_ss(h);
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

// 16-float chunks; the last chunk of a head slice is masked.
struct Isa {
  using V = __m512;
  using M = __mmask16;
  static constexpr int kW = 16;
  static M mask(int lanes) { return static_cast<M>(lanes == 16 ? 0xFFFFu : (1u << lanes) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // 16 int8 values as floats.
  static V from_i8(const uint8_t* x) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static float sum(V a) { return _mm512_reduce_add_ps(a); }
  static V load(const float* x, M m) { return _mm512_maskz_loadu_ps(m, x); }
  static void store(float* x, M m, V a) { _mm512_mask_storeu_ps(x, m, a); }
};

// Chunk loaders: chunk c (values [col + 16c, col + 16c + 16) of a stored
// row), dequantized in registers.
template <KVDtype D>
struct Load {
  int col;
  __m512 operator()(const uint8_t* row, int c, __mmask16 m) const {
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
                                      _mm512_set1_ps(block_scale(blk)));
      if (w <= 16) return v1;
      const __mmask16 m2 = static_cast<__mmask16>(m & ~m1);
      const uint8_t* nxt = blk + kQ8_0BlockBytes;
      const __m512 v2 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m2, nxt + 2 - (32 - w)))),
                        _mm512_set1_ps(block_scale(nxt)));
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
        return _mm512_mul_ps(_mm512_cvtepi32_ps(qi), _mm512_set1_ps(block_scale(blk)));
      }
      alignas(64) float tmp[16] = {};
      const int n = __builtin_popcount(static_cast<unsigned>(m));
      dequantize_q4_0_range(row, c0, n, tmp);
      return _mm512_maskz_load_ps(m, tmp);
    }
  }
};

// q8_0 with every chunk inside one block (slice start and width multiples
// of 16): one unmasked 16-byte load, no lane split.
struct LoadQ8Whole {
  int col;
  __m512 operator()(const uint8_t* row, int c, __mmask16) const {
    const int c0 = col + 16 * c;
    const uint8_t* blk = row + (c0 >> 5) * kQ8_0BlockBytes;
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + (c0 & 31)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), _mm512_set1_ps(block_scale(blk)));
  }
};

constexpr int kAttendColAlign = 1;  // any slice start
constexpr int kWholeChunks = 16;    // q8_0 slices on this boundary take LoadQ8Whole

#else

// 8-float chunks: head widths must be whole chunks (others take the
// portable path), so the mask is unused.
struct Isa {
  using V = __m256;
  using M = int;
  static constexpr int kW = 8;
  static M mask(int) { return 0; }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // 8 int8 values as floats.
  static V from_i8(const uint8_t* x) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x))));
  }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static float sum(V a) { return simd::hsum(a); }
  static V load(const float* x, M) { return _mm256_loadu_ps(x); }
  static void store(float* x, M, V a) { _mm256_storeu_ps(x, a); }
};

// Values [col + 8c, col + 8c + 8) of a stored row. With col a multiple of 8
// a chunk lies inside one 32-value block.
template <KVDtype D>
struct Load {
  int col;
  __m256 operator()(const uint8_t* row, int c, int) const {
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
      const __m256 d = _mm256_set1_ps(block_scale(blk));
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
using LoadQ8Whole = Load<KVDtype::kQ8_0>;

constexpr int kAttendColAlign = 8;  // quantized slices start on a chunk (so a chunk lies inside a block)
constexpr int kWholeChunks = 8;

#endif

// Per-key operations on NC chunks of a head slice, from chunk loaders:
// dot(row, qv) = K_row . q as a register of partial sums, axpy(row, w, o):
// o += w V_row. Every dtype runs the same arithmetic in the same order.
template <int NC, class LoadK, class LoadV>
struct ChunkOps {
  LoadK load_k;
  LoadV load_v;
  Isa::M last;
  Isa::M mask(int c) const { return c == NC - 1 ? last : Isa::mask(Isa::kW); }
  Isa::V dot(const uint8_t* row, const Isa::V* qv) const {
    Isa::V a = Isa::zero();
    for (int c = 0; c < NC; ++c) a = Isa::fma(load_k(row, c, mask(c)), qv[c], a);
    return a;
  }
  void axpy(const uint8_t* row, float w, Isa::V* o) const {
    const Isa::V wv = Isa::set1(w);
    for (int c = 0; c < NC; ++c) o[c] = Isa::fma(wv, load_v(row, c, mask(c)), o[c]);
  }
};

// q8_0 slices of whole 32-value blocks: a block's scale multiplies its
// partial dot product once (scores) and folds into the key's weight
// (values), instead of scaling every value: per value one conversion and
// one FMA.
template <int NC>
struct Q8BlockOps {
  static constexpr int kPerBlock = 32 / Isa::kW;  // chunks per block
  size_t first;                                   // byte offset of the slice's first block in a row
  Isa::M mask(int) const { return Isa::mask(Isa::kW); }
  Isa::V dot(const uint8_t* row, const Isa::V* qv) const {
    Isa::V a = Isa::zero();
    for (int b = 0; b < NC / kPerBlock; ++b) {
      const uint8_t* blk = row + first + static_cast<size_t>(b) * kQ8_0BlockBytes;
      Isa::V x = Isa::mul(Isa::from_i8(blk + 2), qv[b * kPerBlock]);
      for (int c = 1; c < kPerBlock; ++c) x = Isa::fma(Isa::from_i8(blk + 2 + Isa::kW * c), qv[b * kPerBlock + c], x);
      a = Isa::fma(x, Isa::set1(block_scale(blk)), a);
    }
    return a;
  }
  void axpy(const uint8_t* row, float w, Isa::V* o) const {
    for (int b = 0; b < NC / kPerBlock; ++b) {
      const uint8_t* blk = row + first + static_cast<size_t>(b) * kQ8_0BlockBytes;
      const Isa::V wv = Isa::set1(w * block_scale(blk));
      for (int c = 0; c < kPerBlock; ++c)
        o[b * kPerBlock + c] = Isa::fma(wv, Isa::from_i8(blk + 2 + Isa::kW * c), o[b * kPerBlock + c]);
    }
  }
};

// NC chunks per head slice: the query and the output accumulators live in
// registers. Scores go four keys per pass (four independent chains);
// weighted values two keys per pass, even keys into o0 and odd ones into o1
// by their index in the whole sequence, so the sums are the same however the
// keys are split into runs.
template <int NC, class Ops>
void attend_keys(const float* q, const Runs& runs, const Ops& ops, int len, float scale, float* p, float* out) {
  using V = Isa::V;
  const size_t s = runs.stride;
  V qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = Isa::load(q + Isa::kW * c, ops.mask(c));
  float* pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const uint8_t* k = runs.runs[r].k;
    const int n = runs.runs[r].n;
    int i = 0;
    for (; i + 4 <= n; i += 4, k += 4 * s, pj += 4) {
      const V a0 = ops.dot(k, qv), a1 = ops.dot(k + s, qv), a2 = ops.dot(k + 2 * s, qv), a3 = ops.dot(k + 3 * s, qv);
      pj[0] = Isa::sum(a0) * scale;
      pj[1] = Isa::sum(a1) * scale;
      pj[2] = Isa::sum(a2) * scale;
      pj[3] = Isa::sum(a3) * scale;
    }
    for (; i < n; ++i, k += s, ++pj) *pj = Isa::sum(ops.dot(k, qv)) * scale;
  }
  softmax(p, len);

  V o0[NC], o1[NC];
  for (int c = 0; c < NC; ++c) o0[c] = o1[c] = Isa::zero();
  const float* pv = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const uint8_t* v = runs.runs[r].v;
    const int n = runs.runs[r].n;
    int i = 0;
    if (n > 0 && ((pv - p) & 1)) {  // an odd key opens the run
      ops.axpy(v, *pv++, o1);
      i = 1;
      v += s;
    }
    for (; i + 2 <= n; i += 2, v += 2 * s, pv += 2) {
      ops.axpy(v, pv[0], o0);
      ops.axpy(v + s, pv[1], o1);
    }
    if (i < n) ops.axpy(v, *pv++, o0);  // an even key closes it
  }
  for (int c = 0; c < NC; ++c) Isa::store(out + Isa::kW * c, ops.mask(c), Isa::add(o0[c], o1[c]));
}

template <int NC, class LoadK, class LoadV>
void attend_chunks(const float* q, const Runs& runs, const LoadK& k, const LoadV& v, int hd, int len, float scale,
                   float* p, float* out) {
  const ChunkOps<NC, LoadK, LoadV> ops{k, v, Isa::mask(hd - Isa::kW * (NC - 1))};
  attend_keys<NC>(q, runs, ops, len, scale, p, out);
}

// Head widths of up to 128 values in whole-register chunks (AVX-512: any
// width up to 80, or 128; AVX2: multiples of 8); false for the portable path.
template <class LoadK, class LoadV>
bool attend_dispatch(const float* q, const Runs& runs, const LoadK& k, const LoadV& v, int hd, int len, float scale,
                     float* p, float* out) {
  if (Isa::kW == 8 && hd % 8 != 0) return false;
  switch ((hd + Isa::kW - 1) / Isa::kW) {
    case 1:
      attend_chunks<1>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 2:
      attend_chunks<2>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 3:
      attend_chunks<3>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 4:
      attend_chunks<4>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 5:
      attend_chunks<5>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 6:
      attend_chunks<6>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 8:
      attend_chunks<8>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    case 16:
      attend_chunks<16>(q, runs, k, v, hd, len, scale, p, out);
      return true;
    default:
      return false;
  }
}

template <KVDtype D>
bool attend_vector(const float* q, const Runs& runs, int col, int hd, int len, float scale, float* p, float* out) {
  if constexpr (D == KVDtype::kQ8_0 || D == KVDtype::kQ4_0) {
    if (col % kAttendColAlign != 0) return false;
  }
  if constexpr (D == KVDtype::kQ8_0) {
    constexpr int kB = 32 / Isa::kW;  // chunks per block
    const size_t first = static_cast<size_t>(col / 32) * kQ8_0BlockBytes;
    if (col % 32 == 0 && hd % 32 == 0) {
      switch (hd / 32) {
        case 1:
          attend_keys<kB>(q, runs, Q8BlockOps<kB>{first}, len, scale, p, out);
          return true;
        case 2:
          attend_keys<2 * kB>(q, runs, Q8BlockOps<2 * kB>{first}, len, scale, p, out);
          return true;
        case 4:
          attend_keys<4 * kB>(q, runs, Q8BlockOps<4 * kB>{first}, len, scale, p, out);
          return true;
        default:
          break;
      }
    }
    if (col % kWholeChunks == 0 && hd % kWholeChunks == 0)
      return attend_dispatch(q, runs, LoadQ8Whole{col}, LoadQ8Whole{col}, hd, len, scale, p, out);
  }
  return attend_dispatch(q, runs, Load<D>{col}, Load<D>{col}, hd, len, scale, p, out);
}

#endif

// Every build's fallback (the portable build's only path, and head widths
// the vector paths do not take): per key, eight values of the head's slice
// at a time are converted (dequantized) into a register-sized chunk, then
// fixed-order dot products and sums, identical for every layout.
// deq(row, first, n, dst) converts values [first, first + n) of a row.
template <class Deq>
void attend_portable(const float* q, const Runs& runs, const Deq& deq, int hd, int len, float scale, float* p,
                     float* out) {
  float b[8];
  float* pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const uint8_t* k = runs.runs[r].k;
    for (int j = 0; j < runs.runs[r].n; ++j, k += runs.stride) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < hd; i += 8) {
        const int n = std::min(8, hd - i);
        deq(k, i, n, b);
        for (int t = 0; t < n; ++t) acc[t] += b[t] * q[i + t];
      }
      *pj++ = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) * scale;
    }
  }
  softmax(p, len);
  std::fill(out, out + hd, 0.0f);
  pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const uint8_t* v = runs.runs[r].v;
    for (int j = 0; j < runs.runs[r].n; ++j, v += runs.stride) {
      const float w = *pj++;
      for (int i = 0; i < hd; i += 8) {
        const int n = std::min(8, hd - i);
        deq(v, i, n, b);
        for (int t = 0; t < n; ++t) out[i + t] += w * b[t];
      }
    }
  }
}

// attend_portable's arithmetic (the same sums in the same order, so the same
// result) for f32 rows, read in place: no copy through a call per 8 values,
// and whole 8-value chunks the compiler vectorises (WebAssembly's default layout).
void attend_f32(const float* q, const Runs& runs, int col, int hd, int len, float scale, float* p, float* out) {
  const size_t stride = runs.stride / sizeof(float);
  const int whole = hd & ~7;
  float* pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const float* k = reinterpret_cast<const float*>(runs.runs[r].k) + col;
    for (int j = 0; j < runs.runs[r].n; ++j, k += stride) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < whole; i += 8)
        for (int t = 0; t < 8; ++t) acc[t] += k[i + t] * q[i + t];
      for (int t = 0; whole + t < hd; ++t) acc[t] += k[whole + t] * q[whole + t];
      *pj++ = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) * scale;
    }
  }
  softmax(p, len);
  std::fill(out, out + hd, 0.0f);
  pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const float* v = reinterpret_cast<const float*>(runs.runs[r].v) + col;
    for (int j = 0; j < runs.runs[r].n; ++j, v += stride) {
      const float w = *pj++;
      for (int i = 0; i < hd; ++i) out[i] += w * v[i];
    }
  }
}

#ifdef __wasm_simd128__
// attend_f32 in SIMD128 registers, for head widths of 8 * NC8 values: the same
// products, sums and order (so the same weights as every other layout in the
// page), four keys a pass. a = values 8c..8c+3, b = 8c+4..8c+7 of a key's
// eight running sums (attend_portable's acc[0..3], acc[4..7]).
struct Acc8 {
  v128_t a, b;
};

// [(s0 + s1), (s2 + s3), (s4 + s5), (s6 + s7)] of a key's eight sums.
inline v128_t pair_sums(const Acc8& s) {
  return wasm_f32x4_add(wasm_i32x4_shuffle(s.a, s.b, 0, 2, 4, 6), wasm_i32x4_shuffle(s.a, s.b, 1, 3, 5, 7));
}

// Two keys' pair sums x, y -> [x0 + x1, x2 + x3, y0 + y1, y2 + y3].
inline v128_t halves(v128_t x, v128_t y) {
  return wasm_f32x4_add(wasm_i32x4_shuffle(x, y, 0, 2, 4, 6), wasm_i32x4_shuffle(x, y, 1, 3, 5, 7));
}

template <int NC8>
Acc8 dot8(const float* k, const v128_t* qa, const v128_t* qb) {
  Acc8 s{wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
  for (int c = 0; c < NC8; ++c) {
    s.a = wasm_f32x4_add(s.a, wasm_f32x4_mul(wasm_v128_load(k + 8 * c), qa[c]));
    s.b = wasm_f32x4_add(s.b, wasm_f32x4_mul(wasm_v128_load(k + 8 * c + 4), qb[c]));
  }
  return s;
}

template <int NC8>
void attend_f32_simd128(const float* q, const Runs& runs, int col, int len, float scale, float* p, float* out) {
  const size_t stride = runs.stride / sizeof(float);
  v128_t qa[NC8], qb[NC8];
  for (int c = 0; c < NC8; ++c) qa[c] = wasm_v128_load(q + 8 * c), qb[c] = wasm_v128_load(q + 8 * c + 4);
  const v128_t sc = wasm_f32x4_splat(scale);
  float* pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const float* k = reinterpret_cast<const float*>(runs.runs[r].k) + col;
    const int n = runs.runs[r].n;
    int j = 0;
    for (; j + 4 <= n; j += 4, k += 4 * stride, pj += 4) {
      const v128_t z0 = pair_sums(dot8<NC8>(k, qa, qb)), z1 = pair_sums(dot8<NC8>(k + stride, qa, qb));
      const v128_t z2 = pair_sums(dot8<NC8>(k + 2 * stride, qa, qb)), z3 = pair_sums(dot8<NC8>(k + 3 * stride, qa, qb));
      wasm_v128_store(pj, wasm_f32x4_mul(halves(halves(z0, z1), halves(z2, z3)), sc));
    }
    for (; j < n; ++j, k += stride) {
      const v128_t z = halves(pair_sums(dot8<NC8>(k, qa, qb)), wasm_f32x4_splat(0.0f));
      *pj++ = (wasm_f32x4_extract_lane(z, 0) + wasm_f32x4_extract_lane(z, 1)) * scale;
    }
  }
  softmax(p, len);
  v128_t oa[NC8], ob[NC8];
  for (int c = 0; c < NC8; ++c) oa[c] = ob[c] = wasm_f32x4_splat(0.0f);
  pj = p;
  for (int r = 0; r < runs.n_runs; ++r) {
    const float* v = reinterpret_cast<const float*>(runs.runs[r].v) + col;
    for (int j = 0; j < runs.runs[r].n; ++j, v += stride) {
      const v128_t w = wasm_f32x4_splat(*pj++);
      for (int c = 0; c < NC8; ++c) {
        oa[c] = wasm_f32x4_add(oa[c], wasm_f32x4_mul(w, wasm_v128_load(v + 8 * c)));
        ob[c] = wasm_f32x4_add(ob[c], wasm_f32x4_mul(w, wasm_v128_load(v + 8 * c + 4)));
      }
    }
  }
  for (int c = 0; c < NC8; ++c) wasm_v128_store(out + 8 * c, oa[c]), wasm_v128_store(out + 8 * c + 4, ob[c]);
}

// Head widths 8-48, 64 and 128 (the models' widths: kvscope-tiny 40, GPT-2 and
// SmolLM2 64, Llama 128); false otherwise (attend_f32 takes them).
bool attend_f32_vector(const float* q, const Runs& runs, int col, int hd, int len, float scale, float* p, float* out) {
  if (hd % 8 != 0) return false;
  switch (hd / 8) {
#define KVSCOPE_NC8(n)                                       \
  case n:                                                    \
    attend_f32_simd128<n>(q, runs, col, len, scale, p, out); \
    return true;
    KVSCOPE_NC8(1)
    KVSCOPE_NC8(2)
    KVSCOPE_NC8(3)
    KVSCOPE_NC8(4)
    KVSCOPE_NC8(5)
    KVSCOPE_NC8(6)
    KVSCOPE_NC8(8)
    KVSCOPE_NC8(16)
#undef KVSCOPE_NC8
    default:
      return false;
  }
}
#endif

// attend_f32 reads the rows as floats where they lie: only when every row
// starts on a float's alignment (a byte stride and run starts that are
// multiples of 4); other views go through the copying path.
bool floats_in_place(const Runs& runs) {
  if (runs.stride % sizeof(float) != 0) return false;
  for (int r = 0; r < runs.n_runs; ++r) {
    if (reinterpret_cast<uintptr_t>(runs.runs[r].k) % alignof(float) != 0 ||
        reinterpret_cast<uintptr_t>(runs.runs[r].v) % alignof(float) != 0)
      return false;
  }
  return true;
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

void attend_runs(const float* q, const KVRunsView& view, int hd, int len, float scale, float* p, float* out) noexcept {
  const Runs runs{view.runs, view.n_runs, view.stride};
#ifdef KVSCOPE_ATTEND_CHUNKS
  using D = KVDtype;
  const auto vector = view.dtype == D::kF32    ? attend_vector<D::kF32>
                      : view.dtype == D::kF16  ? attend_vector<D::kF16>
                      : view.dtype == D::kQ8_0 ? attend_vector<D::kQ8_0>
                                               : attend_vector<D::kQ4_0>;
  if (vector(q, runs, view.col, hd, len, scale, p, out)) return;
#endif
  if (view.dtype == KVDtype::kF32 && floats_in_place(runs)) {
#ifdef __wasm_simd128__
    if (attend_f32_vector(q, runs, view.col, hd, len, scale, p, out)) return;
#endif
    return attend_f32(q, runs, view.col, hd, len, scale, p, out);
  }
  attend_portable(
      q, runs,
      [&](const uint8_t* row, int i, int n, float* dst) { dequantize_slice(view.dtype, row, view.col + i, n, dst); },
      hd, len, scale, p, out);
}

void attend(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale, float* p,
            float* out) {
  const KVRowRun run{reinterpret_cast<const uint8_t*>(K), reinterpret_cast<const uint8_t*>(V), len};
  attend_runs(q, KVRunsView{KVDtype::kF32, &run, 1, static_cast<size_t>(stride) * sizeof(float), 0}, hd, len, scale, p,
              out);
}

}  // namespace kvscope
