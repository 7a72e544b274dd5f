// `kvscope inspect --model FILE.gguf`: a GGUF file's metadata and tensors
// (name, shape, type, block layout, bytes), as stored.
#pragma once

#include <string>

#include "model/arch/gguf_model.h"  // gguf_model_path

namespace kvscope {

// Prints the listing (or, with `json`, the same as JSON); 0 on success.
// Throws kvscope::Error for a bad file.
int inspect_gguf(const std::string& path, bool json);

}  // namespace kvscope
