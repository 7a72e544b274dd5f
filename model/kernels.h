// The engine's inner loops for one new position (decode): matrix-vector
// products y = W x + b with W row-major (rows, cols), in f32 or as stored
// IEEE binary16, and one query's attention over the cached keys/values.
// Decode streams every weight once per token, so the products run at memory
// (or cache) bandwidth when several rows share each load of x and each row
// has its own accumulator chain.
#pragma once

#include <cstdint>

#include "kv_cache.h"

namespace kvscope {

// y[r] = sum_k W[r, k] x[k] (+ b[r] when b is not null), r in [r0, r1).
void matvec_f32(const float* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1);
void matvec_f16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1);
// W as bfloat16 bits (the upper half of an f32): Llama-family checkpoints' usual dtype.
void matvec_bf16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1);

// One query row of one head over `len` keys (itself included):
//   p[j] = softmax_j(scale * K_j . q), out = sum_j p[j] V_j,   j < len,
// with K_j = K + j * stride and V_j = V + j * stride (hd floats each; the
// cache stores all heads of a position in one row, so stride = n_embd).
// p (len) receives the attention weights, out (hd) the weighted values.
void attend(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale, float* p,
            float* out);

// The same over keys stored in a KV cache: one row pointer per key (the
// cache's runs, in position order), rows of `dtype` holding every head, this
// head's slice starting at value `col`. Quantized rows are dequantized in
// registers as they are read; f32 rows give bit-identical results to attend().
struct KVRowsView {
  KVDtype dtype = KVDtype::kF32;
  const uint8_t* const* k = nullptr;  // (len) K row of each key
  const uint8_t* const* v = nullptr;  // (len) V row of each key
  int col = 0;
};
void attend_rows(const float* q, const KVRowsView& rows, int hd, int len, float scale, float* p, float* out);

}  // namespace kvscope
