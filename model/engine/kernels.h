// The engine's inner loops for one new position (decode) on row-major
// weights (builds without AVX-512, and the f32 copies; AVX-512 builds store
// panels and decode through linear_kernels.h): matrix-vector products
// y = W x + b with W (rows, cols), in f32 or as stored IEEE binary16, and one
// query's attention over the cached keys/values.
// Decode streams every weight once per token, so the products run at memory
// (or cache) bandwidth when several rows share each load of x and each row
// has its own accumulator chain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kv/kv_cache.h"

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

// The same over keys stored in a KV cache, as runs of consecutive rows (a
// page of a paged cache, or a sequence's contiguous reservation): run r holds
// runs[r].n keys, key i of it at runs[r].k + i * stride bytes (its value at
// runs[r].v + i * stride), in position order across the runs; len is the
// total. Rows of `dtype` hold every head, this head's slice starting at value
// `col`. Quantized rows are dequantized in registers as they are read; f32
// rows give bit-identical results to attend(), however the keys are split
// into runs.
struct KVRowRun {
  const uint8_t* k = nullptr;  // first K row of the run
  const uint8_t* v = nullptr;  // first V row of the run
  int n = 0;                   // keys in the run
};
struct KVRunsView {
  KVDtype dtype = KVDtype::kF32;
  const KVRowRun* runs = nullptr;
  int n_runs = 0;
  size_t stride = 0;  // bytes from one row of a run to the next
  int col = 0;
};
void attend_runs(const float* q, const KVRunsView& view, int hd, int len, float scale, float* p, float* out) noexcept;

}  // namespace kvscope
