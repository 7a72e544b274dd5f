// The context a Llama-family model runs at (the --ctx flag), checked the
// same way wherever it is given: load_model, and the window's flag before
// the window opens.
#pragma once

#include <string>

#include "model/arch/config.h"

namespace kvscope {

// Sets `c`'s context to `context` positions: refused with a UsageError
// naming --ctx for a GPT-2 model (its learned position table fixes the
// context) or beyond max_position_embeddings. `dir` names the model.
void apply_context(Config& c, int context, const std::string& dir);

// The config of what load_model(dir_or_id) would load, without its weights
// (what the window's flags are checked against before it opens): a folder's
// config.json, or a GGUF file's metadata (config_from_gguf).
Config load_model_config(const std::string& dir_or_id);

}  // namespace kvscope
