// quantize_row (gguf_quantize.h): llama.cpp's reference quantizers, step for
// step in f32, each operation rounded on its own as C specifies: GCC would
// otherwise fuse a * b + c into one multiply-add wherever the CPU has FMA
// (its default for C++, even with -std=c++17) and clang within an
// expression, and a scale one bit off changes the bytes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "model/arch/gguf_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "model/core/error.h"
#include "model/core/numeric.h"

#ifdef __clang__
#pragma clang fp contract(off)
#endif

namespace kvscope {
namespace {

// Sub-block maxima below this are all-zero blocks (llama.cpp's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

float get_half(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Round to nearest, ties to even, for |v| < 2^22: v + 1.5 * 2^23 puts the
// integer in the low mantissa bits (llama.cpp's nearest_int).
int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// The value of largest magnitude (the first, on ties) and that magnitude.
void signed_max(const float* x, int n, float& max, float& amax) {
  max = 0.0f;
  amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
}

void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int i = 0; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
  }
}

void block_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// Q4_0 and Q5_0 (bits 4, 5): symmetric around 2^(bits-1); the fifth bits of
// Q5_0 go to a little-endian uint32 before the nibbles.
void block_symmetric(const float* x, int bits, uint8_t* b) {
  float max = 0.0f, amax = 0.0f;
  signed_max(x, 32, max, amax);
  const float half = static_cast<float>(1 << (bits - 1));
  const float d = max / -half;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  const int top = (1 << bits) - 1;
  uint32_t qh = 0;
  uint8_t* qs = b + (bits == 5 ? 6 : 2);
  for (int j = 0; j < 16; ++j) {
    const float x0 = x[j] * id, x1 = x[j + 16] * id;
    const int q0 = std::min(top, static_cast<int>(static_cast<int8_t>(x0 + (half + 0.5f))));
    const int q1 = std::min(top, static_cast<int>(static_cast<int8_t>(x1 + (half + 0.5f))));
    qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (bits == 5)
    for (int k = 0; k < 4; ++k) b[2 + k] = static_cast<uint8_t>(qh >> (8 * k));
}

// Q4_1 and Q5_1: d = (max - min) / top and the min; Q5_1's fifth bits as Q5_0's.
void block_with_min(const float* x, int bits, uint8_t* b) {
  float min = 0.0f, max = 0.0f;
  min_max(x, 32, min, max);
  const int top = (1 << bits) - 1;
  const float d = (max - min) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  put_half(b + 2, min);
  uint32_t qh = 0;
  uint8_t* qs = b + (bits == 5 ? 8 : 4);
  for (int j = 0; j < 16; ++j) {
    const float x0 = (x[j] - min) * id, x1 = (x[j + 16] - min) * id;
    int q0 = static_cast<int>(static_cast<uint8_t>(static_cast<int8_t>(x0 + 0.5f)));
    int q1 = static_cast<int>(static_cast<uint8_t>(static_cast<int8_t>(x1 + 0.5f)));
    if (bits == 4) q0 = std::min(15, q0), q1 = std::min(15, q1);
    qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if (bits == 5)
    for (int k = 0; k < 4; ++k) b[4 + k] = static_cast<uint8_t>(qh >> (8 * k));
}

// The quants of 32 weights x for q = (x - min) / scale in [0, nmax], min <= 0:
// `q` and `quants` (scratch) of 32; weighted squared error (weights w).
struct ScaleMin {
  float scale = 0.0f, neg_min = 0.0f;  // w = scale * q - neg_min
};

float weighted_error(const float* x, const float* w, const uint8_t* q, float scale, float min) {
  float err = 0.0f;
  for (int i = 0; i < 32; ++i) {
    float diff = scale * static_cast<float>(q[i]) + min - x[i];
    diff = diff * diff;
    err += w[i] * diff;
  }
  return err;
}

// make_qkx2_quants: the first fit from the range, then nstep + 1 candidate
// scales (rmin + rdelta i + nmax) / (max - min), each refined by weighted
// least squares for scale and min; the candidate of least weighted error wins.
ScaleMin fit_scale_min(const float* x, const float* w, int nmax, float rmin, float rdelta, int nstep, uint8_t* q) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < 32; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(q, q + 32, 0);
    return {0.0f, -min};
  }
  float iscale = static_cast<float>(nmax) / (max - min), scale = 1 / iscale;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best = weighted_error(x, w, q, scale, min);
  uint8_t cand[32];
  for (int is = 0; is <= nstep; ++is) {
    // (min is the best candidate's so far, as in llama.cpp's loop)
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < 32; ++i) {
      cand[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
      const float l = cand[i];
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float err = weighted_error(x, w, cand, this_scale, this_min);
    if (err < best) {
      std::copy(cand, cand + 32, q);
      best = err;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

// Q4_K (bits 4) and Q5_K (bits 5): 8 sub-blocks of 32, each fitted above,
// their scales and mins stored as 6-bit multiples of d and dmin.
void block_k45(const float* x, int bits, uint8_t* b) {
  const int nmax = (1 << bits) - 1;
  uint8_t L[256];
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    const ScaleMin f = bits == 4 ? fit_scale_min(xs, w, nmax, -1.0f, 0.1f, 20, L + 32 * j)
                                 : fit_scale_min(xs, w, nmax, -0.5f, 0.1f, 15, L + 32 * j);
    scales[j] = f.scale;
    mins[j] = f.neg_min;
    if (f.scale > max_scale) max_scale = f.scale;
    if (f.neg_min > max_min) max_min = f.neg_min;
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* packed = b + 4;
  std::fill(packed, packed + 12, 0);
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_scale * scales[j]))));
    lm[j] = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_min * mins[j]))));
    if (j < 4) {
      packed[j] = static_cast<uint8_t>(ls[j]);
      packed[j + 4] = static_cast<uint8_t>(lm[j]);
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  put_half(b, max_scale / 63.f);
  put_half(b + 2, max_min / 63.f);
  const float d_all = get_half(b), dmin_all = get_half(b + 2);
  for (int j = 0; j < 8; ++j) {
    const float d = d_all * static_cast<float>(ls[j]);
    if (d == 0.0f) continue;  // the fit's quants stay
    const float dm = dmin_all * static_cast<float>(lm[j]);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
  // Weights 64p + l and 64p + 32 + l share nibble byte 32p + l; Q5_K's
  // fifth bits are bits 2p and 2p + 1 of byte l of qh.
  uint8_t* qh = b + 16;
  uint8_t* qs = b + (bits == 5 ? 48 : 16);
  if (bits == 5) std::fill(qh, qh + 32, 0);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
      qs[32 * p + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      if (bits == 5) qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
    }
}

// make_qx_quants with x^2 weights: a signed scale for 16 weights, q in
// [-nmax, nmax - 1] stored + nmax; 18 candidate scales around -nmax / max.
float fit_signed_scale(const float* x, int nmax, int8_t* L) {
  float max = 0, amax = 0;
  signed_max(x, 16, max, amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + 16, 0);
    return 0.f;
  }
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < 16; ++i) {
      const float l = static_cast<float>(std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto set_quants = [&](float iscale) {
    for (int i = 0; i < 16; ++i)
      L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max, sumlx = 0, suml2 = 0;
  set_quants(iscale);
  sums(iscale, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      set_quants(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q6_K: 16 sub-blocks of 16 with int8 scales against d = max_scale / -128.
void block_q6_k(const float* x, uint8_t* b) {
  int8_t L[256];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = fit_signed_scale(x + 16 * ib, 32, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  std::fill(b, b + 210, 0);
  if (max_abs_scale < kGroupMaxEps) return;  // all zero, d = 0
  const float iscale = -128.f / max_scale;
  put_half(b + 208, 1 / iscale);
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  const float d_all = get_half(b + 208);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  // decode_q6_k's layout (gguf_types.cpp), written.
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int8_t* q = L + 128 * h + l;  // q[32 g]: group g of this half
      b[64 * h + l] = static_cast<uint8_t>((q[0] & 0xF) | ((q[64] & 0xF) << 4));
      b[64 * h + l + 32] = static_cast<uint8_t>((q[32] & 0xF) | ((q[96] & 0xF) << 4));
      b[128 + 32 * h + l] =
          static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
    }
}

void quantize_block(GgmlType type, const float* x, uint8_t* b) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(b, x, 4);
      return;
    case GgmlType::kF16:
      return put_half(b, *x);
    case GgmlType::kBF16: {
      const uint16_t h = f32_to_bf16(*x);
      b[0] = static_cast<uint8_t>(h & 0xFF);
      b[1] = static_cast<uint8_t>(h >> 8);
      return;
    }
    case GgmlType::kQ8_0:
      return block_q8_0(x, b);
    case GgmlType::kQ4_0:
      return block_symmetric(x, 4, b);
    case GgmlType::kQ5_0:
      return block_symmetric(x, 5, b);
    case GgmlType::kQ4_1:
      return block_with_min(x, 4, b);
    case GgmlType::kQ5_1:
      return block_with_min(x, 5, b);
    case GgmlType::kQ4_K:
      return block_k45(x, 4, b);
    case GgmlType::kQ5_K:
      return block_k45(x, 5, b);
    case GgmlType::kQ6_K:
      return block_q6_k(x, b);
  }
}

}  // namespace

void quantize_row(GgmlType type, const float* x, int64_t n, uint8_t* blocks) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (n < 0 || n % info.block_size != 0)
    throw Error(std::string("cannot quantize ") + std::to_string(n) + " weights to " + info.name +
                ": expected a multiple of its block of " + std::to_string(info.block_size));
  for (int64_t i = 0; i < n / info.block_size; ++i)
    quantize_block(type, x + i * info.block_size, blocks + i * info.block_bytes);
}

}  // namespace kvscope
