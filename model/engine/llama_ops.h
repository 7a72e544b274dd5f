// The Llama-architecture pieces of the forward pass (engine.cpp runs them):
// RMSNorm, rotary position embeddings (rotate-half, with rope_scaling),
// SwiGLU. The matrix products are linear() (model/engine/linear.h).
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/llama_weights.h"
#include "model/arch/model.h"
#include "model/core/thread_pool.h"

namespace kvscope {

// Y = X / sqrt(mean(X^2) + eps) * g, row by row.
void rms_norm(const MatrixRM& X, const std::vector<float>& g, float eps, MatrixRM& Y);

// gate = silu(gate) * up, elementwise.
void swiglu(ThreadPool& pool, MatrixRM& gate, const MatrixRM& up);

// The rotary frequencies of a config: theta^(-2i/hd), rescaled by rope_scaling.
std::vector<double> rope_inv_freq(const Config& c);

// Rotates `n_heads` heads of width hd at x (contiguous) for position `pos`,
// rotate-half convention: [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin].
void apply_rope(float* x, int n_heads, int hd, int pos, const std::vector<double>& inv_freq);

}  // namespace kvscope
