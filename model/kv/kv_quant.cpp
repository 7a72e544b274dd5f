#include "model/kv/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/core/numeric.h"

namespace kvscope {

uint16_t f64_to_f16(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(x);
  if (std::isnan(x)) return 0x7e00u;
  if (a >= 65520.0) return sign | 0x7c00u;  // 65520 and above round to infinity
  if (a < std::ldexp(1.0, -14)) {
    // Subnormal: units of 2^-24 (exact in double); 1024 units is the smallest normal, same bits.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24))));
  }
  int e = 0;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  double m = std::nearbyint((f * 2.0 - 1.0) * 1024.0);
  int biased = e - 1 + 15;
  if (m == 1024.0) {
    m = 0;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00u;
  return static_cast<uint16_t>(sign | (biased << 10) | static_cast<int>(m));
}

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void store_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, 2);
}

}  // namespace

void quantize_row_q8_0(const float* x, int n, uint8_t* out) {
  for (int b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock, out += kQ8_0BlockBytes) {
    double amax = 0;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(static_cast<double>(x[j])));
    const double d = amax / 127.0;
    store_u16(out, f64_to_f16(d));
    for (int j = 0; j < kQuantBlock; ++j) {
      const double q = d == 0 ? 0.0 : std::round(static_cast<double>(x[j]) / d);  // half away from zero
      out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void quantize_row_q4_0(const float* x, int n, uint8_t* out) {
  for (int b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock, out += kQ4_0BlockBytes) {
    double amax = 0, max = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      const double v = x[j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const double d = max / -8.0;
    store_u16(out, f64_to_f16(d));
    auto code = [&](double v) {
      const int q = d == 0 ? 8 : static_cast<int>(v / d + 8.5);
      return static_cast<uint8_t>(q < 15 ? q : 15);
    };
    for (int j = 0; j < kQuantBlock / 2; ++j)
      out[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + kQuantBlock / 2]) << 4));
  }
}

void quantize_row_f16(const float* x, int n, uint16_t* out) {
  for (int j = 0; j < n; ++j) out[j] = f32_to_f16(x[j]);
}

void dequantize_row_q8_0(const uint8_t* in, int n, float* out) {
  dequantize_q8_0_range(in, 0, n, out);
}
void dequantize_row_q4_0(const uint8_t* in, int n, float* out) {
  dequantize_q4_0_range(in, 0, n, out);
}
void dequantize_row_f16(const uint16_t* in, int n, float* out) {
  for (int j = 0; j < n; ++j) out[j] = f16_to_f32(in[j]);
}

void dequantize_q8_0_range(const uint8_t* row, int first, int n, float* out) {
  int i = first;
  const int end = first + n;
  while (i < end) {
    const int b = i / kQuantBlock;
    const uint8_t* blk = row + static_cast<size_t>(b) * kQ8_0BlockBytes;
    const float d = f16_to_f32(load_u16(blk));
    const int stop = std::min(end, (b + 1) * kQuantBlock);
    for (; i < stop; ++i) *out++ = static_cast<float>(static_cast<int8_t>(blk[2 + i % kQuantBlock])) * d;
  }
}

void dequantize_q4_0_range(const uint8_t* row, int first, int n, float* out) {
  int i = first;
  const int end = first + n;
  while (i < end) {
    const int b = i / kQuantBlock;
    const uint8_t* blk = row + static_cast<size_t>(b) * kQ4_0BlockBytes;
    const float d = f16_to_f32(load_u16(blk));
    const int stop = std::min(end, (b + 1) * kQuantBlock);
    for (; i < stop; ++i) {
      const int j = i % kQuantBlock;
      const int q = j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4);
      *out++ = static_cast<float>(q - 8) * d;
    }
  }
}

}  // namespace kvscope
