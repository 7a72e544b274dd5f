// A GGUF file (llama.cpp, Ollama, LM Studio) as a kvscope Model: its
// hyperparameters (config_from_gguf), its tensors by llama.cpp's names into
// the family's weights (Gpt2Weights for gpt2, LlamaWeights for llama and
// qwen2), and its tokenizer from the metadata (tokenizer_from_gguf).
#pragma once

#include <string>

#include "model/arch/gguf.h"
#include "model/arch/load_control.h"

namespace kvscope {

struct Model;

// The GGUF file `model` names: the path itself when it is a regular file
// ending in .gguf or starting with the GGUF magic (an Ollama blob has no
// extension), or the one .gguf file in a folder that has no config.json;
// empty otherwise. A folder without config.json holding several .gguf files
// is refused, naming them (the user must pick one).
std::string gguf_model_path(const std::string& model);

// Fills m (config, weights, tokenizer, n_params, file_bytes, stored_dtype)
// from the GGUF file `path`. Every tensor the family reads is checked
// (present, dims, type) before any is read; an Error names the file, the
// tensor, what was expected and what was found. Llama-architecture Q and K
// rows, which llama.cpp's converter reorders by head (LlamaModel.permute),
// are put back in Hugging Face's order. Refused, like a safetensors folder,
// when the weights as kept and the KV cache at full context exceed the
// memory available. `context`: control.context (the CLI's --ctx).
void load_gguf_model(const std::string& path, Model& m, const LoadControl& control);

}  // namespace kvscope
