// Loading a GPT-2 folder's weights (see gpt2_loader.cpp); Llama-family
// folders load through llama_loader.h.
#pragma once

#include <string>

#include "model/arch/config.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"

namespace kvscope {

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
// m.file_bytes, m.stored_dtype) for m.config. Throws kvscope::Error naming
// the file and tensor, expected and actual, on a missing, misshapen, wrongly
// typed or non-finite tensor, or when the weights as kept and the KV cache at
// full context exceed the memory available.
void load_gpt2_weights(const std::string& dir, Model& m, const LoadControl& control);

}  // namespace kvscope
