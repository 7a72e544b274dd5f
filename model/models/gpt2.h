// The GPT-2 family, whole: what it reads from config.json, its tensor names
// and loader (HF's GPT2LMHeadModel, Conv1D weights kept transposed at their
// stored precision, every shape checked), its weights, and its part of the
// forward pass (learned positions, LayerNorm, fused QKV, GELU MLP). The loop
// over layers, attention over the cache and `linear` are the engine's
// (model/engine/engine.cpp), shared with every family.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch/safetensors.h"
#include "model/models/family.h"

namespace kvscope {

struct Gpt2Layer {
  Vector ln_1_g, ln_1_b;       // (d)
  WeightMatrix attn_w_t;       // (3d, d)  c_attn.weight transposed from Conv1D (d, 3d)
  Vector attn_b;               // (3d)
  WeightMatrix attn_proj_w_t;  // (d, d)   c_proj.weight transposed
  Vector attn_proj_b;          // (d)
  Vector ln_2_g, ln_2_b;       // (d)
  WeightMatrix fc_w_t;         // (4d, d)  mlp.c_fc.weight transposed from (d, 4d)
  Vector fc_b;                 // (4d)
  WeightMatrix mlp_proj_w_t;   // (d, 4d)  mlp.c_proj.weight transposed from (4d, d)
  Vector mlp_proj_b;           // (d)
};

struct Gpt2Weights {
  WeightMatrix wte;  // (vocab, d) token embeddings, also the tied LM head
  MatrixRM wpe;      // (n_positions, d) f32 (small: read one row per position)
  std::vector<Gpt2Layer> layers;
  Vector ln_f_g, ln_f_b;  // (d)
  WeightMatrix lm_head;   // (vocab, d); empty when tied to wte
  const WeightMatrix& embedding() const { return wte; }
  const WeightMatrix& head() const { return lm_head.empty() ? wte : lm_head; }
  std::vector<const WeightMatrix*> layer_matrices() const;  // every layer's four, in order
  uint64_t vector_bytes() const;                            // the norm weights and biases (f32)
  uint64_t resident_bytes() const;                          // everything above as held (f32 copies included)
  // What one position reads besides the products: its wte row as stored and its f32 wpe row.
  uint64_t lookup_bytes() const { return embedding().row_bytes() + static_cast<uint64_t>(wpe.cols()) * 4; }
};

// config.json's GPT-2 fields (n_layer, n_head, n_embd, n_positions or n_ctx,
// ...). Throws kvscope::Error naming `origin` and the field.
Config parse_gpt2_config(const nlohmann::json& j, const std::string& origin);

// What loading a GPT-2 model.safetensors for config `c` keeps and holds at
// its peak: the weights as kept (KeptWeights: f32 copies of 16-bit matrices
// where the plan keeps them, wide_max_bytes as in LoadControl), and what
// the memory check compares with the memory available: the weights as kept
// (read one tensor at a time from the file, never held whole), the largest
// temporary of reading them (a Conv1D weight's transposed copy, 4 d^2
// values, or the position table as read, in f32 and copied, 3 P d values;
// counted at 4 bytes a value) and the KV cache at full context. `st`: the
// file's header (SafeTensors::open_header).
struct Gpt2LoadPlan {
  KeptWeights kept;
  uint64_t need_bytes = 0;
};
Gpt2LoadPlan plan_gpt2_load(const SafeTensors& st, const Config& c, uint64_t wide_max_bytes);

// Reads `dir`/model.safetensors into m.weights (with m.n_params,
// m.file_bytes, m.stored_dtype) for m.config, then vocab.json + merges.txt
// into m.tokenizer. Throws kvscope::Error naming the file and tensor,
// expected and actual, on a missing, misshapen, wrongly typed or non-finite
// tensor, or when the weights as kept and the KV cache at full context
// exceed the memory available.
void load_gpt2(const std::string& dir, Model& m, const LoadControl& control);

// The forward pass's GPT-2 steps, run by Engine::forward. x: (n, d) the
// batch's token plus position embeddings.
void embed(const Gpt2Weights& w, const std::vector<BatchEntry>& batch, MatrixRM& x);
// Layer l on the residual stream p.ws.x (n, d): LayerNorm, fused QKV,
// attention over the cache (p.attend), projection, LayerNorm, GELU MLP.
void run_layer(const Config& c, const Gpt2Weights& w, detail::LayerPass& p, int l);
// logits: (sel.rows(), vocab) row-major, the caller's storage; sel (rows, d).
void head_logits(const Config& c, const Gpt2Weights& w, Workspace& ws, const MatrixRM& sel, float* logits,
                 uint64_t& flops);

}  // namespace kvscope
