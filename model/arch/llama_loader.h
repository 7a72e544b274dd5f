// Loading a Llama-architecture folder's weights (see llama_loader.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "model/arch/config.h"
#include "model/arch/llama_weights.h"
#include "model/arch/model.h"

namespace kvscope {

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

}  // namespace kvscope
