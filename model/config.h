// GPT-2 hyper-parameters, read from a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>

namespace kvscope {

struct Config {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int n_positions = 0;  // context length
  int vocab_size = 0;
  float layer_norm_epsilon = 1e-5f;
  std::string activation_function = "gelu_new";
  int bos_token_id = -1;
  int eos_token_id = -1;

  int head_dim() const { return n_embd / n_head; }
  // f32 K and V for one position across all layers.
  uint64_t kv_bytes_per_token() const {
    return 2ull * static_cast<uint64_t>(n_layer) * static_cast<uint64_t>(n_embd) * 4ull;
  }
};

// Parses and validates `path` (a config.json). Throws kvscope::Error naming
// the file and field on anything missing or out of range.
Config load_config(const std::string& path);
// Same, from JSON text; `origin` is used in error messages.
Config parse_config(const std::string& json_text, const std::string& origin);

}  // namespace kvscope
