// What every family's loader is told (progress, cancelling, context, f32
// copies, bf16 products) and the memory it checks against.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "model/arch/weight_matrix.h"

namespace kvscope {

// Optional hooks for loading on a worker thread: progress in [0, 1] and a
// flag that, once set, makes load_model throw kvscope::Error ("cancelled").
struct LoadControl {
  std::function<void(float)> on_progress;
  const std::atomic<bool>* cancel = nullptr;
  // Llama family: positions to run and reserve the KV cache for (the CLI's
  // --ctx), at most max_position_embeddings; 0 = min(that, kLlamaContextCap).
  int context = 0;
  // f32 copies of the 16-bit matrices for a model whose weight matrices take
  // at most this many bytes (plan_kept_weights): the build's rule unless a
  // test sets it (native builds keep none; tests exercise the copies natively).
  uint64_t wide_max_bytes = kWideMaxMatrixBytes;
  // BF16 matrices multiply inputs rounded to bf16 (WeightMatrix::bf16_products):
  // the CLI's --bf16-products. A model with no BF16 matrix is refused.
  bool bf16_products = false;
};

// Bytes of memory available to a new allocation, 0 if unknown: Linux MemAvailable natively; in the page, the
// WebAssembly heap's maximum less what is allocated.
uint64_t available_memory_bytes();

}  // namespace kvscope
