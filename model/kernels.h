// The engine's inner loops for one new position (decode): matrix-vector
// products y = W x + b with W row-major (rows, cols), in f32 or as stored
// IEEE binary16, and one query's attention over the cached keys/values.
// Decode streams every weight once per token, so the products run at memory
// (or cache) bandwidth when several rows share each load of x and each row
// has its own accumulator chain.
#pragma once

#include <cstdint>

namespace kvscope {

// y[r] = sum_k W[r, k] x[k] (+ b[r] when b is not null), r in [r0, r1).
void matvec_f32(const float* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1);
void matvec_f16(const uint16_t* W, int64_t cols, const float* x, const float* b, float* y, int64_t r0, int64_t r1);

// One query row of one head over `len` keys (itself included):
//   p[j] = softmax_j(scale * K_j . q), out = sum_j p[j] V_j,   j < len,
// with K_j = K + j * stride and V_j = V + j * stride (hd floats each; the
// cache stores all heads of a position in one row, so stride = n_embd).
// p (len) receives the attention weights, out (hd) the weighted values.
void attend(const float* q, const float* K, const float* V, int64_t stride, int hd, int len, float scale, float* p,
            float* out);

}  // namespace kvscope
