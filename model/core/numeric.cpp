#include "model/core/numeric.h"

#include <cstring>

namespace kvscope {

const char* to_string(StoredType t) {
  // Indexed by the enum's values, in its order.
  static const char* const kNames[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0",
                                       "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"};
  const auto i = static_cast<size_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "F32";
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);  // inf / nan
  if (abs >= 0x477ff000u) return sign | 0x7c00u;                                      // overflows to inf
  if (abs < 0x38800000u) {                                                            // subnormal half (or zero)
    const uint32_t shift = 126 - (abs >> 23);
    if (shift > 24) return sign;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t h = mant >> (shift);
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = ((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3ffu);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace kvscope
