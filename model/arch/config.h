// Model hyper-parameters, read from a Hugging Face config.json: GPT-2, or a
// Llama-architecture model (model_type llama, mistral, qwen2). Each family
// reads its own fields (parse_gpt2_config, parse_llama_config in
// model/models/); the defaults here are GPT-2's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

// The family: which loader load_model runs (model/models/gpt2.h, llama.h).
enum class Arch { kGpt2, kLlama };

// rope_scaling of a Llama config: none, "linear" (positions / factor) or
// "llama3" (Llama-3.1/3.2: long wavelengths divided by factor, short ones
// kept, a smooth blend between low_freq_factor and high_freq_factor).
struct RopeScaling {
  std::string type;  // "" (none), "linear", "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int original_max_position_embeddings = 0;
};

struct Config {
  Arch arch = Arch::kGpt2;
  std::string model_type = "gpt2";     // "gpt2", "llama", "mistral", "qwen2"
  std::string display_name = "GPT-2";  // for display: "GPT-2", or the Llama family's model_type
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int n_positions = 0;  // context length kvscope runs (Llama: max_position_embeddings, capped)

  // Llama-architecture fields (GPT-2: n_kv_head = n_head, n_inner = 4 n_embd).
  int n_kv_head = 0;                // K/V heads (grouped-query attention); 0 means n_head
  int head_size = 0;                // per-head width when config.json gives head_dim; 0 means n_embd / n_head
  int n_inner = 0;                  // MLP width (intermediate_size)
  int mlp_matrices = 2;             // (ff, d) matrices in the MLP: GPT-2's fc, proj; SwiGLU's gate, up, down
  bool learned_positions = true;    // GPT-2: a learned table of n_positions rows fixes the context (no --ctx)
  int max_position_embeddings = 0;  // the model's own context limit
  double rope_theta = 10000.0;      // RoPE base
  RopeScaling rope_scaling;         // type "" = none
  bool tie_word_embeddings = true;  // LM head = token embeddings
  int sliding_window = 0;           // 0 = full causal attention, else a query sees its last W positions
  bool qkv_bias = false;            // q/k/v projections have biases (Qwen2)
  std::vector<int> eos_token_ids;   // every end-of-sequence id (eos_token_id may be a list)
  int vocab_size = 0;
  float layer_norm_epsilon = 1e-5f;
  std::string activation_function = "gelu_new";
  int bos_token_id = -1;
  int eos_token_id = -1;

  int head_dim() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // The one stop-token rule, for every decoding strategy and output form:
  // any id of eos_token_ids ends a generation, and is not part of its text.
  bool is_eos(int token) const {
    for (int e : eos_token_ids)
      if (e == token) return true;
    return eos_token_id >= 0 && token == eos_token_id;
  }
  // K/V bytes per position: kv_bytes_per_position() in kv_cache.h.
};

// Parses and validates `path` (a config.json). Throws kvscope::Error naming
// the file and field on anything missing or out of range.
Config load_config(const std::string& path);
// Same, from JSON text; `origin` is used in error messages.
Config parse_config(const std::string& json_text, const std::string& origin);

// The context kvscope runs a Llama-family model at unless asked for another
// (LoadControl::context, the CLI's --ctx): its KV cache is reserved for it
// whole, and Llama-3.2's 131072 positions would take 8 GiB in f32. The
// model's own max_position_embeddings is kept as is, as the upper bound.
constexpr int kLlamaContextCap = 8192;

}  // namespace kvscope
