// A loaded checkpoint: config, weights, tokenizer. The weight matrices of
// both families stay at their stored precision (WeightMatrix).
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
#include "model/arch/weight_matrix.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// Row-major so that a weight stored transposed, (out, in), gives contiguous
// dot products for decode (matrix-vector) and plain GEMM for prefill.
using MatrixRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

struct LayerWeights {
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

struct Weights {
  WeightMatrix wte;  // (vocab, d) token embeddings, also the tied LM head
  MatrixRM wpe;      // (n_positions, d) f32 (small: read one row per position)
  std::vector<LayerWeights> layers;
  Vector ln_f_g, ln_f_b;  // (d)
  WeightMatrix lm_head;   // (vocab, d); empty when tied to wte
  const WeightMatrix& head() const { return lm_head.empty() ? wte : lm_head; }
  std::vector<const WeightMatrix*> layer_matrices() const;  // every layer's four, in order
  uint64_t vector_bytes() const;                            // the norm weights and biases (f32)
  uint64_t resident_bytes() const;                          // everything above as held (f32 copies included)
};

struct Model {
  std::string dir;   // folder it came from
  std::string name;  // folder basename, for display
  Config config;
  Weights weights;     // GPT-2 (config.arch == Arch::kGpt2)
  LlamaWeights llama;  // Llama, Mistral, Qwen2 (config.arch == Arch::kLlama)
  Tokenizer tokenizer;
  uint64_t n_params = 0;       // as stored (a tied head counted once)
  uint64_t file_bytes = 0;     // those parameters' bytes in the file(s): n_params x 2 for an F16 file
  std::string stored_dtype;    // "F32", "F16", "BF16" or "mixed" (for display)
  bool bf16_products = false;  // its BF16 matrices take bf16 inputs (LoadControl::bf16_products)
  // Resident bytes of the weights: matrices as stored (and their f32 copies
  // where the WebAssembly build keeps them, WeightMatrix::wide), vectors in f32.
  uint64_t weight_bytes() const { return config.is_llama() ? llama.resident_bytes() : weights.resident_bytes(); }
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
  // f32 copies of the 16-bit matrices for a model whose weight matrices take
  // at most this many bytes (plan_kept_weights): the build's rule unless a
  // test sets it (native builds keep none; tests exercise the copies natively).
  uint64_t wide_max_bytes = kWideMaxMatrixBytes;
  // BF16 matrices multiply inputs rounded to bf16 (WeightMatrix::bf16_products):
  // the CLI's --bf16-products. A model with no BF16 matrix is refused.
  bool bf16_products = false;
};

// Loads config.json, model.safetensors, vocab.json and merges.txt from
// `dir` (GPT-2), or config.json, model.safetensors or its shards with
// model.safetensors.index.json, and tokenizer.json (Llama, Mistral, Qwen2). Checks every tensor's name, dtype, shape
// and byte range; throws kvscope::Error with the file, tensor, expected and actual on mismatch. Before reading the
// weights it checks that the file plus the weights kept fit in the memory available, and refuses with a clear
// message otherwise. A Hugging Face id ("ORG/NAME") that is not a folder here is looked up in the local Hugging
// Face cache (model/arch/hf_cache.h).
std::shared_ptr<const Model> load_model(const std::string& dir_or_id, const LoadControl& control = {});

// Bytes of memory available to a new allocation, 0 if unknown: Linux MemAvailable natively; in the page, the
// WebAssembly heap's maximum less what is allocated.
uint64_t available_memory_bytes();

// Weights-only loader used by tests with an explicit config.
Weights load_weights(const std::string& safetensors_path, const Config& config);

}  // namespace kvscope
