// The engine's one matrix product, for both model families: Y = X W^T + b
// with W at its stored precision (F32, F16, BF16), split across the pool.
// Each weight is read from memory once per call whatever the number of
// positions n, so a forward over a few positions costs about what decode does
// while the machine is memory-bound.
#pragma once

#include <cstdint>

#include "model/arch/weight_matrix.h"
#include "model/core/thread_pool.h"

namespace kvscope {

// Y (n, W.rows) = X (n, W.cols) W^T (+ b[W.rows] when b is not null).
// flops += 2 n rows cols.
void linear(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, MatrixRM& Y, uint64_t& flops);
// The same into the caller's storage Y (n, W.rows) row-major: the forward's
// logits go straight into what it returns, with no second (n, vocab) buffer
// (megabytes a forward at a few positions, freshly paged in each time).
void linear(ThreadPool& pool, const MatrixRM& X, const WeightMatrix& W, const float* b, float* Y, uint64_t& flops);

}  // namespace kvscope
