// One decode step's record as a JSON object: the lines of `kvscope generate
// --json` and, in the browser, window.kvscope.state() (app/platform/web/).
#pragma once

#include <nlohmann/json.hpp>

#include "model/decoding/generator.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// The prefill (with the prompt's tokens) or a decode step.
nlohmann::json step_json(const StepRecord& r, const Tokenizer& tok);

}  // namespace kvscope
