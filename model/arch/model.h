// A loaded checkpoint: config, weights, tokenizer. The weights are one
// family's (model/models/: a std::variant, one alternative a family); their
// matrices stay at their stored precision (WeightMatrix).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/load_control.h"
#include "model/arch/weight_matrix.h"
#include "model/models/gpt2.h"
#include "model/models/llama.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// One alternative per family. A new family adds its weights here, its loader
// to load_model's switch and its config parser to parse_config: the engine
// runs whichever is held through one std::visit (Engine::forward).
using FamilyWeights = std::variant<Gpt2Weights, LlamaWeights>;

struct Model {
  std::string dir;   // folder it came from, or its GGUF file
  std::string name;  // folder basename (a GGUF file's name less .gguf), for display
  Config config;
  FamilyWeights weights;  // the family's: Gpt2Weights (Arch::kGpt2), LlamaWeights (Arch::kLlama)
  Tokenizer tokenizer;
  uint64_t n_params = 0;       // as stored (a tied head counted once)
  uint64_t file_bytes = 0;     // those parameters' bytes in the file(s): n_params x 2 for an F16 file
  std::string stored_dtype;    // "F32", "F16", "BF16", a GGUF's "Q4_K" ... or "mixed" (for display)
  bool bf16_products = false;  // its BF16 matrices take bf16 inputs (LoadControl::bf16_products)
  // Resident bytes of the weights: matrices as stored (and their f32 copies
  // where the WebAssembly build keeps them, WeightMatrix::wide), vectors in f32.
  uint64_t weight_bytes() const {
    return std::visit([](const auto& w) { return w.resident_bytes(); }, weights);
  }
  double load_seconds = 0;
};

// Loads config.json, model.safetensors, vocab.json and merges.txt from
// `dir` (GPT-2), or config.json, model.safetensors or its shards with
// model.safetensors.index.json, and tokenizer.json (Llama, Mistral, Qwen2). Checks every tensor's name, dtype, shape
// and byte range; throws kvscope::Error with the file, tensor, expected and actual on mismatch. Before reading the
// weights it checks that the file plus the weights kept fit in the memory available, and refuses with a clear
// message otherwise. A Hugging Face id ("ORG/NAME") that is not a folder here is looked up in the local Hugging
// Face cache (model/arch/hf_cache.h). A GGUF file, or a folder without config.json holding one, is read by
// load_gguf_model (model/arch/gguf_model.h) into the same families' weights.
std::shared_ptr<const Model> load_model(const std::string& dir_or_id, const LoadControl& control = {});

// For the family loaders: m.tokenizer from `dir`, refused (naming `vocab_path`,
// the file it read) when it has more tokens than m.config.vocab_size.
void load_tokenizer(Model& m, const std::string& dir, const std::string& vocab_path);

}  // namespace kvscope
