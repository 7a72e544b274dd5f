// GgufValue's typed element access and listing text (gguf.h).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "model/arch/gguf.h"
#include "model/core/error.h"

namespace kvscope {

int gguf_scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

namespace {

bool is_signed(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 || t == GgufValueType::kI64;
}

// The little-endian bytes of element i, zero-extended to 64 bits.
uint64_t raw_bits(const GgufValue& v, uint64_t i) {
  if (i >= v.count) {
    throw Error("element " + std::to_string(i) + " of a value of " + std::to_string(v.count) + " elements");
  }
  const int size = gguf_scalar_bytes(v.type);
  const auto* p = reinterpret_cast<const unsigned char*>(v.bytes.data()) + i * static_cast<uint64_t>(size);
  uint64_t bits = 0;
  for (int b = size - 1; b >= 0; --b) bits = (bits << 8) | p[b];
  return bits;
}

// Element i of an integer value, sign-extended when its type is signed.
int64_t signed_value(const GgufValue& v, uint64_t i) {
  const uint64_t bits = raw_bits(v, i);
  const int shift = 64 - 8 * gguf_scalar_bytes(v.type);
  return static_cast<int64_t>(bits << shift) >> shift;
}

[[noreturn]] void wrong_type(const GgufValue& v, const char* expected) {
  throw Error(std::string("expected ") + expected + ", found " + (v.is_array ? "an array of " : "") +
              to_string(v.type));
}

std::string scalar_text(const GgufValue& v, uint64_t i) {
  if (v.type == GgufValueType::kString) return gguf_quote(v.string_at(i), 60);
  if (v.type == GgufValueType::kBool) return v.bool_at(i) ? "true" : "false";
  if (v.is_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v.number_at(i));
    return buf;
  }
  return is_signed(v.type) ? std::to_string(v.int_at(i)) : std::to_string(raw_bits(v, i));
}

}  // namespace

namespace {

// The length of the whole, valid UTF-8 character of 2 to 4 bytes at s[k], or
// 0 (ASCII, a stray or cut byte, an overlong form, a surrogate, a code point
// above U+10FFFF, or a C1 control character, U+0080 to U+009F).
size_t utf8_char(std::string_view s, size_t k) {
  const auto b = static_cast<unsigned char>(s[k]);
  const size_t len = (b >= 0xC2 && b < 0xE0) ? 2 : (b >= 0xE0 && b < 0xF0) ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
  if (len == 0 || k + len > s.size()) return 0;
  for (size_t i = 1; i < len; ++i)
    if ((static_cast<unsigned char>(s[k + i]) & 0xC0) != 0x80) return 0;
  const auto c1 = static_cast<unsigned char>(s[k + 1]);
  if ((b == 0xC2 && c1 < 0xA0) || (b == 0xE0 && c1 < 0xA0) || (b == 0xED && c1 >= 0xA0) || (b == 0xF0 && c1 < 0x90) ||
      (b == 0xF4 && c1 >= 0x90))
    return 0;
  return len;
}

}  // namespace

std::string gguf_quote(std::string_view s, size_t max_bytes) {
  std::string q = "\"";
  size_t k = 0;
  while (k < s.size() && k < max_bytes) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (const size_t len = utf8_char(s, k); len > 0) {
      if (k + len > max_bytes) break;
      q.append(s.substr(k, len));
      k += len;
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    q += (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? std::string(1, static_cast<char>(c)) : hex;
    ++k;
  }
  return q + (k < s.size() ? "...\"" : "\"");
}

const char* to_string(GgufValueType t) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "unknown";
}

bool GgufValue::is_integer() const {
  return gguf_scalar_bytes(type) > 0 && type != GgufValueType::kBool && !is_float();
}

bool GgufValue::is_float() const {
  return type == GgufValueType::kF32 || type == GgufValueType::kF64;
}

int64_t GgufValue::int_at(uint64_t i) const {
  if (!is_integer()) wrong_type(*this, "an integer");
  if (type == GgufValueType::kU64 && raw_bits(*this, i) > uint64_t{std::numeric_limits<int64_t>::max()}) {
    throw Error("expected an integer up to " + std::to_string(std::numeric_limits<int64_t>::max()) + ", found " +
                std::to_string(raw_bits(*this, i)));
  }
  return is_signed(type) ? signed_value(*this, i) : static_cast<int64_t>(raw_bits(*this, i));
}

uint64_t GgufValue::uint_at(uint64_t i) const {
  if (!is_integer()) wrong_type(*this, "a non-negative integer");
  if (is_signed(type) && signed_value(*this, i) < 0)
    throw Error("expected a non-negative integer, found " + std::to_string(signed_value(*this, i)));
  return raw_bits(*this, i);
}

double GgufValue::number_at(uint64_t i) const {
  if (type == GgufValueType::kF32) {
    const auto bits = static_cast<uint32_t>(raw_bits(*this, i));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if (type == GgufValueType::kF64) {
    const uint64_t bits = raw_bits(*this, i);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (!is_integer()) wrong_type(*this, "a number");
  return is_signed(type) ? static_cast<double>(signed_value(*this, i)) : static_cast<double>(raw_bits(*this, i));
}

bool GgufValue::bool_at(uint64_t i) const {
  if (type != GgufValueType::kBool) wrong_type(*this, "a bool");
  return raw_bits(*this, i) != 0;
}

std::string_view GgufValue::string_at(uint64_t i) const {
  if (type != GgufValueType::kString) wrong_type(*this, "a string");
  if (i >= count) raw_bits(*this, i);  // throws: out of range
  const uint64_t begin = i == 0 ? 0 : string_ends[i - 1];
  return std::string_view(bytes).substr(begin, string_ends[i] - begin);
}

std::string GgufValue::summary() const {
  if (!is_array) return std::string(to_string(type)) + " " + scalar_text(*this, 0);
  std::string s = "array of " + std::to_string(count) + " " + to_string(type);
  if (count == 0) return s;
  s += ": [";
  const uint64_t shown = count < 4 ? count : 4;
  for (uint64_t i = 0; i < shown; ++i) s += (i ? ", " : "") + scalar_text(*this, i);
  return s + (count > shown ? ", ...]" : "]");
}

}  // namespace kvscope
