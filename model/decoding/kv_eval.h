// Scoring a token sequence under a KV cache layout against the dense f32
// cache, position by position: what `kvscope eval` sums over a text and the
// Cache panel plots for the text on screen (one implementation for both).
#pragma once

#include <cstdint>
#include <vector>

#include "model/engine/engine.h"
#include "model/kv/kv_cache.h"

namespace kvscope {

struct LayoutScores {
  // Position i predicts token i + 1 from tokens [0, i]; n = tokens - 1.
  std::vector<double> nll;          // (n) -log p(token i+1) under the layout, nats
  std::vector<double> nll_dense;    // (n) the same under dense f32 (empty without a dense cache)
  std::vector<double> kl;           // (n) KL(dense || layout) of the next-token distributions
  std::vector<double> max_dlogit;   // (n) max over the vocabulary of |logit - dense logit|
  std::vector<uint8_t> top1_agree;  // (n) 1 where both caches' most likely tokens agree
  uint64_t kv_bytes = 0;            // the layout's cache right after the forward
};

// One forward of `tokens` (2 .. n_ctx of them, ids in the vocabulary) in
// `cache` (emptied before and after; a layout evicting by score runs one
// forward per position instead, as generation does) and, when `dense` is given, another in
// it for the comparisons.
LayoutScores score_layout(Engine& engine, KVCache& cache, KVCache* dense, const std::vector<int>& tokens);

}  // namespace kvscope
