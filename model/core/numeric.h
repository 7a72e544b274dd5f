// Half-precision number formats as bits: IEEE binary16 (F16) and bfloat16
// (BF16, the upper half of an f32). Shared by the checkpoint readers, the
// matrix kernels and the KV-cache quantizer.
#pragma once

#include <cstdint>

namespace kvscope {

// A weight's stored element type.
enum class StoredType : uint8_t { kF32, kF16, kBF16 };
const char* to_string(StoredType t);  // "F32" / "F16" / "BF16"
inline int64_t stored_bytes(StoredType t) {
  return t == StoredType::kF32 ? 4 : 2;
}

float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);
// Round to nearest even; exact for every value an F16 tensor can hold.
uint16_t f32_to_f16(float f);
// Round to nearest even (NaN stays NaN); exact for every value a BF16 tensor can hold.
uint16_t f32_to_bf16(float f);

}  // namespace kvscope
