// Half-precision number formats as bits: IEEE binary16 (F16) and bfloat16
// (BF16, the upper half of an f32). Shared by the checkpoint readers, the
// matrix kernels and the KV-cache quantizer.
#pragma once

#include <cstdint>
#include <cstring>

namespace kvscope {

// A weight's stored element type: a float format (F32, F16, BF16), or one of
// ggml's block-quantized types (GGUF files: model/arch/gguf_types.h has their
// block layouts, and ggml_type_of / stored_type_of map the two enums).
enum class StoredType : uint8_t { kF32, kF16, kBF16, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K };
const char* to_string(StoredType t);  // "F32" / "F16" / "BF16" / "Q4_0" ... "Q6_K" (llama.cpp's names)
// Stored as blocks of several weights (no per-element width: a matrix's
// bytes are stored_values_bytes, weight_matrix.h).
inline bool is_quantized(StoredType t) {
  return t >= StoredType::kQ4_0;
}
// Bytes per element of a float type (F32 4, F16 and BF16 2); quantized
// types have none (this returns 0 for them).
inline int64_t stored_bytes(StoredType t) {
  return t == StoredType::kF32 ? 4 : is_quantized(t) ? 0 : 2;
}

// Exact for every value (normals, subnormals, inf, NaN with its payload).
// Inline and branch-free: the exponent and mantissa shifted into an f32 and
// scaled by 2^(127 - 15), which is exact for normals and subnormals alike, so
// the weight kernels' loops over many halves vectorise it. (The product is
// a subnormal f32 times 2^112 for a subnormal half: exact as long as nothing
// sets the CPU to flush subnormal inputs to zero, and nothing in kvscope does.)
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t scaled_bits = em << 13;
  float f;
  std::memcpy(&f, &scaled_bits, 4);
  f *= 0x1p112f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (em >= 0x7c00u) bits = 0x7f800000u | (em << 13);  // inf, NaN
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Round to nearest even; exact for every value an F16 tensor can hold.
uint16_t f32_to_f16(float f);
// Round to nearest even (NaN stays NaN); exact for every value a BF16 tensor
// can hold. Inline and branch-free: the BF16 products round every input of a
// matrix with it, and it vectorises.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace kvscope
