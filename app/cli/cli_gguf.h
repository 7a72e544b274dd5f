// `kvscope inspect --model FILE.gguf`: a GGUF file's metadata and tensors
// (name, shape, type, block layout, bytes), before kvscope can run one.
#pragma once

#include <string>

namespace kvscope {

// The GGUF file `model` names: the path itself when it is a regular file
// ending in .gguf or starting with the GGUF magic (an Ollama blob has no
// extension), or the one .gguf file in a folder that has no config.json.
// Empty when `model` is none of these.
std::string gguf_model_path(const std::string& model);

// Prints the listing (or, with `json`, the same as JSON); 0 on success.
// Throws kvscope::Error for a bad file.
int inspect_gguf(const std::string& path, bool json);

}  // namespace kvscope
