// A loaded checkpoint: config, weights, tokenizer. GPT-2 weights are f32 in
// memory (plus half copies for F16); Llama-family weights stay as stored.
#pragma once

#include <Eigen/Core>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/llama_weights.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// Row-major so that a weight stored transposed, (out, in), gives contiguous
// dot products for decode (matrix-vector) and plain GEMM for prefill.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// A weight matrix kept at half precision, (rows, cols) row-major like its f32
// twin. Filled only when the checkpoint stores F16, so the values are the
// same; decode then streams half the bytes per token (it is memory-bound).
struct HalfMatrix {
  std::vector<uint16_t> data;  // (rows, cols) IEEE binary16
  int64_t rows = 0, cols = 0;
  bool empty() const { return data.empty(); }
};

struct LayerWeights {
  Vector ln_1_g, ln_1_b;   // (d)
  MatrixRM attn_w_t;       // (3d, d)  c_attn.weight transposed from Conv1D (d, 3d)
  Vector attn_b;           // (3d)
  MatrixRM attn_proj_w_t;  // (d, d)   c_proj.weight transposed
  Vector attn_proj_b;      // (d)
  Vector ln_2_g, ln_2_b;   // (d)
  MatrixRM fc_w_t;         // (4d, d)  mlp.c_fc.weight transposed from (d, 4d)
  Vector fc_b;             // (4d)
  MatrixRM mlp_proj_w_t;   // (d, 4d)  mlp.c_proj.weight transposed from (4d, d)
  Vector mlp_proj_b;       // (d)
  // F16 checkpoints only: the four matrices above as stored (see HalfMatrix).
  HalfMatrix attn_w_h, attn_proj_w_h, fc_w_h, mlp_proj_w_h;
};

struct Weights {
  MatrixRM wte;  // (vocab, d) token embeddings, also the tied LM head
  MatrixRM wpe;  // (n_positions, d)
  std::vector<LayerWeights> layers;
  Vector ln_f_g, ln_f_b;  // (d)
  MatrixRM lm_head;       // (vocab, d); empty when tied to wte
  const MatrixRM& head() const { return lm_head.size() ? lm_head : wte; }
  HalfMatrix head_h;  // F16 checkpoints only: head() at half precision
};

struct Model {
  std::string dir;   // folder it came from
  std::string name;  // folder basename, for display
  Config config;
  Weights weights;     // GPT-2 (config.arch == Arch::kGpt2)
  LlamaWeights llama;  // Llama, Mistral, Qwen2 (config.arch == Arch::kLlama)
  Tokenizer tokenizer;
  uint64_t n_params = 0;     // as stored (a tied head counted once)
  std::string stored_dtype;  // "F32", "F16", "BF16" or "mixed"
  double load_seconds = 0;
};

// Optional hooks for loading on a worker thread: progress in [0, 1] and a
// flag that, once set, makes load_model throw kvscope::Error ("cancelled").
struct LoadControl {
  std::function<void(float)> on_progress;
  const std::atomic<bool>* cancel = nullptr;
  // Llama family: positions to run and reserve the KV cache for (the CLI's
  // --ctx), at most max_position_embeddings; 0 = min(that, kLlamaContextCap).
  int context = 0;
};

// Loads config.json, model.safetensors, vocab.json and merges.txt from
// `dir` (GPT-2), or config.json, model.safetensors or its shards with
// model.safetensors.index.json, and tokenizer.json (Llama, Mistral, Qwen2). Checks every tensor's name, dtype, shape
// and byte range; throws kvscope::Error with the file, tensor, expected and actual on mismatch. Before reading the
// weights it checks that the file plus its f32 copy fit in the memory available, and refuses with a clear message
// otherwise. A Hugging Face id ("ORG/NAME") that is not a folder here is looked up in
// the local Hugging Face cache (model/arch/hf_cache.h).
std::shared_ptr<const Model> load_model(const std::string& dir_or_id, const LoadControl& control = {});

// Bytes of memory available to a new allocation (Linux MemAvailable), 0 if unknown.
uint64_t available_memory_bytes();

// Weights-only loader used by tests with an explicit config.
Weights load_weights(const std::string& safetensors_path, const Config& config);

}  // namespace kvscope
