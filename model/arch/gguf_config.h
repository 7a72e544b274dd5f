// A GGUF file's hyperparameters as a Config, for the architectures kvscope
// runs: gpt2, llama and qwen2 (general.architecture). The metadata are read
// into the fields of a Hugging Face config.json and checked by the same
// parsers (model/models/), so a GGUF and the safetensors checkpoint it came
// from give the same Config.
#pragma once

#include "model/arch/config.h"
#include "model/arch/gguf.h"

namespace kvscope {

// Throws kvscope::Error naming the file and the GGUF key when a required key
// is missing, of the wrong type, or out of the parsers' range, and for an
// architecture (or a RoPE scaling) kvscope does not run.
Config config_from_gguf(const GgufFile& f);

}  // namespace kvscope
