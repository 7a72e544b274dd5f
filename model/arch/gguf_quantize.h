// Quantizing f32 rows to GGUF blocks, by the published reference rules
// (llama.cpp's quantize_row_*_ref: what `llama-quantize` does for a tensor
// with no importance matrix), so a row quantized here is the same bytes
// llama.cpp writes for it. Block layouts: gguf_types.h.
#pragma once

#include <cstdint>

#include "model/arch/gguf_types.h"

namespace kvscope {

// Writes `n` weights x[0, n) as n / block_size blocks of `type` at `blocks`
// (n / block_size * block_bytes bytes; F32, F16 and BF16 write each value,
// rounded to nearest even). The rules, per block:
//  - Q8_0: d = max|x| / 127, q = round(x / d) (halves away from zero).
//  - Q4_0 / Q5_0: d = -m / 8 (/ 16) with m the value of largest magnitude,
//    q = min(15 (31), trunc(x / d + 8.5 (16.5))).
//  - Q4_1 / Q5_1: d = (max - min) / 15 (31), m = min, q = trunc((x - min) / d + 0.5).
//  - Q4_K / Q5_K: per 32-weight sub-block a scale and min fitted by a
//    weighted search over 21 (16) candidate scales (make_qkx2_quants),
//    the 8 scales and mins quantized to 6 bits against their maxima, then
//    q = clamp(round((x + dmin m) / (d s)), 0, 15 (31)).
//  - Q6_K: per 16-weight sub-block a signed scale from a search over 19
//    candidates weighted by x^2 (make_qx_quants), the 16 scales quantized
//    to int8 against the largest, then q = clamp(round(x / (d s)), -32, 31) + 32.
// Every step is f32 arithmetic in llama.cpp's order, each operation rounded
// on its own (the file is compiled without fused multiply-adds), which is
// what makes the bytes reproducible. (A llama.cpp build whose compiler fuses
// multiply-adds in these loops may differ in the last bit of a scale.)
// x must be finite (the loaders check every weight; a NaN has no quant).
// Throws kvscope::Error when n is negative or not a multiple of the block size.
void quantize_row(GgmlType type, const float* x, int64_t n, uint8_t* blocks);

}  // namespace kvscope
