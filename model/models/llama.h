// The Llama family, whole (Llama, Mistral, Qwen2, SmolLM2, TinyLlama): what
// it reads from config.json, its tensor names and loader (model.safetensors
// or its shards, every shape checked before anything is read), its weights
// kept as stored (F16 and BF16 matrices stay at half precision, norm weights
// and biases f32), and its part of the forward pass (RMSNorm, Q/K/V
// projections with Qwen2's biases, RoPE, SwiGLU MLP). The loop over layers,
// grouped-query attention over the cache and `linear` are the engine's
// (model/engine/engine.cpp), shared with every family.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/models/family.h"

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
  std::vector<float> norm;       // (d) model.norm.weight
  WeightMatrix lm_head;          // (vocab, d); empty when tied to embed
  std::vector<double> inv_freq;  // (hd / 2) RoPE frequencies of the config (rope_inv_freq), not a tensor
  const WeightMatrix& embedding() const { return embed; }
  const WeightMatrix& head() const { return lm_head.empty() ? embed : lm_head; }
  std::vector<const WeightMatrix*> layer_matrices() const;  // every layer's seven, in order
  uint64_t vector_bytes() const;                            // the norm weights and biases (f32)
  uint64_t resident_bytes() const;                          // everything above as held (f32 copies included)
  // What one position reads besides the products: its embedding row as stored.
  uint64_t lookup_bytes() const { return embedding().row_bytes(); }
};

// config.json's Llama-family fields (num_hidden_layers, hidden_size,
// num_key_value_heads, rope_theta, rope_scaling, ...) for model_type `type`.
// Throws kvscope::Error naming `origin` and the field.
Config parse_llama_config(const nlohmann::json& j, const std::string& origin, const std::string& type);

struct LlamaLoadResult {
  LlamaWeights weights;
  uint64_t n_params = 0;     // a tied head counted once
  uint64_t file_bytes = 0;   // those parameters' bytes in the files, at their stored dtypes
  std::string stored_dtype;  // "F32", "F16", "BF16" or "mixed"
  KeptWeights kept;          // what the loader decided to keep (f32 copies or not), before reading
  uint64_t need_bytes = 0;   // what the memory check counted: weights as kept + f32 KV cache at full context
};

// Reads `dir`/model.safetensors or the shards of `dir`/model.safetensors.index.json
// for config `c`. Throws kvscope::Error naming the file, tensor, expected and
// actual on a missing, misshapen, wrongly typed or non-finite tensor, a
// missing shard or index, or when the weights as kept (with f32 copies where
// control.wide_max_bytes allows them) plus the KV cache exceed the memory available.
LlamaLoadResult load_llama_weights(const std::string& dir, const Config& c, const LoadControl& control);

// The weights (load_llama_weights) into m.weights, then tokenizer.json into
// m.tokenizer, for m.config.
void load_llama(const std::string& dir, Model& m, const LoadControl& control);

// The rotary frequencies of a config: theta^(-2i/hd), rescaled by rope_scaling.
std::vector<double> rope_inv_freq(const Config& c);

// The forward pass's Llama steps, run by Engine::forward. x: (n, d) the
// batch's token embeddings.
void embed(const LlamaWeights& w, const std::vector<BatchEntry>& batch, MatrixRM& x);
// Layer l on the residual stream p.ws.x (n, d): RMSNorm, Q/K/V projections,
// RoPE on Q and K, attention over the cache (p.attend), output projection,
// RMSNorm, SwiGLU MLP.
void run_layer(const Config& c, const LlamaWeights& w, detail::LayerPass& p, int l);
// logits: (sel.rows(), vocab) row-major, the caller's storage; sel (rows, d).
void head_logits(const Config& c, const LlamaWeights& w, Workspace& ws, const MatrixRM& sel, float* logits,
                 uint64_t& flops);

}  // namespace kvscope
