// Loading a GPT-2 folder's weights (see gpt2_loader.cpp); Llama-family
// folders load through llama_loader.h.
#pragma once

#include <string>

#include "model/arch/config.h"
#include "model/arch/model.h"

namespace kvscope {

// Reads `dir`/model.safetensors into m.weights (with m.n_params,
// m.stored_bytes, m.stored_dtype) for m.config. Throws kvscope::Error naming
// the file and tensor, expected and actual, on a missing, misshapen, wrongly
// typed or non-finite tensor, or when the file, the weights as kept and the KV
// cache at full context exceed the memory available.
void load_gpt2_weights(const std::string& dir, Model& m, const LoadControl& control);

}  // namespace kvscope
