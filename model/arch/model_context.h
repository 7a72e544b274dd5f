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

}  // namespace kvscope
