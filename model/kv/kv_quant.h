// Row formats of the quantized KV cache: llama.cpp's block layouts.
//   q8_0: blocks of 32 values = fp16 scale d + 32 int8, 34 bytes.
//         d = amax / 127, q = round-half-away-from-zero(x / d), x' = q * d.
//   q4_0: blocks of 32 values = fp16 scale d + 16 bytes of 4-bit codes, 18 bytes.
//         d = (the value of largest magnitude, first one, with its sign) / -8,
//         q = min(15, (int)(x / d + 8.5)), x' = (q - 8) * d; element j in the
//         low nibble of byte j, element 16 + j in its high nibble.
//   f16:  IEEE binary16, round to nearest even.
// The scale is computed in double (x / d correctly rounded) and stored as
// the nearest fp16; d = 0 (an all-zero block) gives q = 0 (q8_0) / 8 (q4_0).
#pragma once

#include <cstdint>

namespace kvscope {

constexpr int kQuantBlock = 32;
constexpr int kQ8_0BlockBytes = 34;
constexpr int kQ4_0BlockBytes = 18;

// double -> IEEE binary16 bits, round to nearest even (overflow gives inf).
uint16_t f64_to_f16(double x);

// n values (a multiple of 32) -> n / 32 blocks.
void quantize_row_q8_0(const float* x, int n, uint8_t* out);
void quantize_row_q4_0(const float* x, int n, uint8_t* out);
void quantize_row_f16(const float* x, int n, uint16_t* out);
void dequantize_row_q8_0(const uint8_t* in, int n, float* out);
void dequantize_row_q4_0(const uint8_t* in, int n, float* out);
void dequantize_row_f16(const uint16_t* in, int n, float* out);

// Values [first, first + n) of a stored row, dequantized (first and n need
// not be block-aligned: a head's slice may straddle blocks).
void dequantize_q8_0_range(const uint8_t* row, int first, int n, float* out);
void dequantize_q4_0_range(const uint8_t* row, int first, int n, float* out);

}  // namespace kvscope
