// Weights of a Llama-architecture checkpoint (Llama, Mistral, Qwen2), kept
// as stored: F16 and BF16 matrices stay at half precision (a 1B model is
// never copied to f32), F32 stays f32. Norm weights and biases are small and
// kept as f32 vectors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/weight_matrix.h"

namespace kvscope {

struct LlamaLayer {
  std::vector<float> attn_norm;       // (d)          input_layernorm.weight
  WeightMatrix wq, wk, wv, wo;        // (H*hd, d), (Hkv*hd, d), (Hkv*hd, d), (d, H*hd)
  std::vector<float> bq, bk, bv;      // (H*hd), (Hkv*hd), (Hkv*hd): Qwen2 only, else empty
  std::vector<float> mlp_norm;        // (d)          post_attention_layernorm.weight
  WeightMatrix w_gate, w_up, w_down;  // (ff, d), (ff, d), (d, ff)
};

struct LlamaWeights {
  WeightMatrix embed;  // (vocab, d) model.embed_tokens.weight
  std::vector<LlamaLayer> layers;
  std::vector<float> norm;  // (d) model.norm.weight
  WeightMatrix lm_head;     // (vocab, d); empty when tied to embed
  const WeightMatrix& head() const { return lm_head.empty() ? embed : lm_head; }
  std::vector<const WeightMatrix*> layer_matrices() const;  // every layer's seven, in order
  uint64_t vector_bytes() const;                            // the norm weights and biases (f32)
  uint64_t resident_bytes() const;                          // everything above as held (f32 copies included)
};

}  // namespace kvscope
