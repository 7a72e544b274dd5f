// Helpers shared by the two tokenizer loaders (tokenizer.cpp: GPT-2 files,
// tokenizer_json.cpp: tokenizer.json). Not part of the library's interface.
#pragma once

#include <string>

namespace kvscope::detail {

// GPT-2's bytes_to_unicode form of a vocab entry -> raw bytes.
std::string byte_level_entry_to_bytes(const std::string& entry);
// The vocab entry (unicode form) of the single byte `b`.
std::string byte_level_entry(unsigned char b);
// A whole file; throws kvscope::Error naming it.
std::string read_tokenizer_file(const std::string& path);

}  // namespace kvscope::detail
