#include "model/arch/gguf_types.h"

#include <cstring>

#include "model/core/error.h"
#include "model/core/numeric.h"

namespace kvscope {
namespace {

// Every block layout below is little-endian; f16 fields are IEEE binary16.
float half_at(const uint8_t* p) {
  return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Q8_0, 34 bytes per 32 weights: f16 scale d, then 32 int8 quants q; w = d * q.
void decode_q8_0(const uint8_t* b, float* out) {
  const float d = half_at(b);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(b[2 + i]));
}

// The 4-bit quant of weight i (0..31) in a 16-byte nibble array: weight i
// and weight i + 16 share byte i % 16, the first in its low nibble.
int nibble32(const uint8_t* qs, int i) {
  return i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4);
}

// The fifth bit of weight i (0..31): bit i of a little-endian uint32.
int high_bit32(const uint8_t* qh, int i) {
  return (qh[i / 8] >> (i % 8)) & 1;
}

// Q4_0, 18 bytes per 32: f16 d, 16 bytes of nibbles; w = d * (q - 8).
void decode_q4_0(const uint8_t* b, float* out) {
  const float d = half_at(b);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(nibble32(b + 2, i) - 8);
}

// Q4_1, 20 bytes per 32: f16 d, f16 m, nibbles; w = d * q + m.
void decode_q4_1(const uint8_t* b, float* out) {
  const float d = half_at(b), m = half_at(b + 2);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(nibble32(b + 4, i)) + m;
}

// Q5_0, 22 bytes per 32: f16 d, 4 bytes of fifth bits, nibbles; w = d * (q - 16).
void decode_q5_0(const uint8_t* b, float* out) {
  const float d = half_at(b);
  for (int i = 0; i < 32; ++i) {
    const int q = nibble32(b + 6, i) | (high_bit32(b + 2, i) << 4);
    out[i] = d * static_cast<float>(q - 16);
  }
}

// Q5_1, 24 bytes per 32: f16 d, f16 m, fifth bits, nibbles; w = d * q + m.
void decode_q5_1(const uint8_t* b, float* out) {
  const float d = half_at(b), m = half_at(b + 2);
  for (int i = 0; i < 32; ++i) {
    const int q = nibble32(b + 8, i) | (high_bit32(b + 4, i) << 4);
    out[i] = d * static_cast<float>(q) + m;
  }
}

// Q4_K and Q5_K pack 8 sub-block scales and 8 mins of 6 bits each into 12
// bytes: sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7
// (mins); sub-blocks 4-7 in the nibbles of bytes 8-11 (scale low, min high)
// with their top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
void k_scale_min(const uint8_t* s, int k, int& scale, int& min) {
  if (k < 4) {
    scale = s[k] & 63;
    min = s[k + 4] & 63;
  } else {
    scale = (s[k + 4] & 0x0F) | ((s[k - 4] >> 6) << 4);
    min = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// Q4_K (144 bytes) and Q5_K (176 bytes) per 256 weights: f16 d, f16 dmin,
// 12 bytes of scales, [Q5_K: 32 bytes of fifth bits,] 128 bytes of nibbles.
// Sub-block k (weights 32k..32k+31) has w = d * scale_k * q - dmin * min_k.
// Weights 64p + l and 64p + 32 + l (l < 32) share nibble byte 32p + l (low,
// high); their fifth bits are bits 2p and 2p + 1 of byte l of the fifth bits.
void decode_k4_k5(const uint8_t* b, bool five_bits, float* out) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = five_bits ? b + 48 : b + 16;
  for (int k = 0; k < 8; ++k) {
    int scale = 0, min = 0;
    k_scale_min(scales, k, scale, min);
    const float ds = d * static_cast<float>(scale), dm = dmin * static_cast<float>(min);
    const int p = k / 2;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * p + l];
      int q = (k % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      if (five_bits) q |= ((qh[l] >> k) & 1) << 4;
      out[32 * k + l] = ds * static_cast<float>(q) - dm;
    }
  }
}

// Q6_K, 210 bytes per 256 weights: 128 bytes of low nibbles (ql), 64 bytes of
// top-2-bit pairs (qh), 16 signed 8-bit scales, f16 d. Weight i has
// w = d * scales[i / 16] * (q - 32). In each half h (weights 128h..128h+127,
// ql + 64h, qh + 32h) the weights 32g + l (g < 4, l < 32) take their nibble
// from ql byte l + 32 * (g % 2) (low for g < 2, high for g >= 2) and their
// top bits from bits 2g, 2g + 1 of qh byte l.
void decode_q6_k(const uint8_t* b, float* out) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = ql[64 * h + l + 32 * (g % 2)];
        const int q = (g < 2 ? (low & 0x0F) : (low >> 4)) | (((qh[32 * h + l] >> (2 * g)) & 3) << 4);
        const int i = 128 * h + 32 * g + l;
        const float ds = d * static_cast<float>(scales[i / 16]);
        out[i] = ds * static_cast<float>(q - 32);
      }
    }
  }
}

const std::vector<GgmlTypeInfo> kReadable = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},       {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, "Q4_1", 32, 20},   {GgmlType::kQ5_0, "Q5_0", 32, 22},   {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},   {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210}, {GgmlType::kBF16, "BF16", 1, 2},
};

std::string trim_number(double v) {
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

const std::vector<GgmlTypeInfo>& ggml_readable_types() {
  return kReadable;
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kReadable)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  return *ggml_type_info(static_cast<uint32_t>(type));
}

GgmlType ggml_type_of(StoredType t) {
  switch (t) {
    case StoredType::kF32:
      return GgmlType::kF32;
    case StoredType::kF16:
      return GgmlType::kF16;
    case StoredType::kBF16:
      return GgmlType::kBF16;
    case StoredType::kQ4_0:
      return GgmlType::kQ4_0;
    case StoredType::kQ4_1:
      return GgmlType::kQ4_1;
    case StoredType::kQ5_0:
      return GgmlType::kQ5_0;
    case StoredType::kQ5_1:
      return GgmlType::kQ5_1;
    case StoredType::kQ8_0:
      return GgmlType::kQ8_0;
    case StoredType::kQ4_K:
      return GgmlType::kQ4_K;
    case StoredType::kQ5_K:
      return GgmlType::kQ5_K;
    case StoredType::kQ6_K:
      return GgmlType::kQ6_K;
  }
  return GgmlType::kF32;
}

StoredType stored_type_of(GgmlType t) {
  for (uint8_t i = 0; i <= static_cast<uint8_t>(StoredType::kQ6_K); ++i)
    if (ggml_type_of(static_cast<StoredType>(i)) == t) return static_cast<StoredType>(i);
  return StoredType::kF32;  // unreachable: every GgmlType has a StoredType
}

const GgmlTypeInfo& ggml_type_info(StoredType t) {
  return ggml_type_info(ggml_type_of(t));
}

std::string ggml_type_name(uint32_t id) {
  // Ids 4, 5, 31-33 and 36-38 were types ggml has since removed.
  static const char* const kNames[] = {
      "F32",        "F16",        "Q4_0",       "Q4_1",  "Q4_2",     "Q4_3",     "Q5_0",     "Q5_1",    "Q8_0",
      "Q8_1",       "Q2_K",       "Q3_K",       "Q4_K",  "Q5_K",     "Q6_K",     "Q8_K",     "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS",    "IQ1_S",      "IQ4_NL",     "IQ3_S", "IQ2_S",    "IQ4_XS",   "I8",       "I16",     "I32",
      "I64",        "F64",        "IQ1_M",      "BF16",  "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0",
      "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", "NVFP4",    "Q1_0",     "Q2_0"};
  return id < sizeof(kNames) / sizeof(kNames[0]) ? kNames[id] : "unknown";
}

std::string ggml_block_layout(const GgmlTypeInfo& t) {
  const std::string weights = t.block_size == 1 ? "1 weight" : std::to_string(t.block_size) + " weights";
  return weights + " in " + std::to_string(t.block_bytes) + " bytes = " + trim_number(t.bits_per_weight()) +
         (t.block_size == 1 ? " bits" : " bits each");
}

void dequantize_row(GgmlType type, const uint8_t* blocks, int64_t n, float* out) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (n < 0 || n % info.block_size != 0) {
    throw Error(std::string("cannot decode ") + std::to_string(n) + " " + info.name +
                " weights: expected a multiple of its block of " + std::to_string(info.block_size));
  }
  const int64_t n_blocks = n / info.block_size;
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* b = blocks + i * info.block_bytes;
    float* o = out + i * info.block_size;
    switch (type) {
      case GgmlType::kF32:
        std::memcpy(o, b, 4);
        break;
      case GgmlType::kF16:
        *o = half_at(b);
        break;
      case GgmlType::kBF16:
        *o = bf16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
        break;
      case GgmlType::kQ8_0:
        decode_q8_0(b, o);
        break;
      case GgmlType::kQ4_0:
        decode_q4_0(b, o);
        break;
      case GgmlType::kQ4_1:
        decode_q4_1(b, o);
        break;
      case GgmlType::kQ5_0:
        decode_q5_0(b, o);
        break;
      case GgmlType::kQ5_1:
        decode_q5_1(b, o);
        break;
      case GgmlType::kQ4_K:
        decode_k4_k5(b, false, o);
        break;
      case GgmlType::kQ5_K:
        decode_k4_k5(b, true, o);
        break;
      case GgmlType::kQ6_K:
        decode_q6_k(b, o);
        break;
    }
  }
}

}  // namespace kvscope
