// The parts of a tokenizer.json that turn text into pre-tokens: normalizers
// (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, Sequence) and
// pre-tokenizers (Split with a regex or string, ByteLevel, Digits, Metaspace,
// Sequence), as Hugging Face's `tokenizers` library runs them. Used by
// tokenizer_json.cpp; not part of the library's interface.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvscope::detail {

// Unicode White_Space (the \s of Oniguruma, used by HF tokenizers, and of
// Python's `regex`, which GPT-2's pattern was written for). JavaScript's \s
// differs: it adds U+FEFF and lacks U+0085 (see tests/test_tokenizer.cpp).
// U+001C..U+001F (whitespace for Python's `re`, not for `regex`) are not.
bool is_white_space(char32_t cp);
// Byte length / code point of the UTF-8 character at s[i] (valid UTF-8 assumed).
std::size_t char_len(const std::string& s, std::size_t i);
char32_t char_at(const std::string& s, std::size_t i);
// Invalid UTF-8 bytes become U+FFFD: tokenizer.json models take Unicode text.
std::string to_valid_utf8(const std::string& text);
std::string replace_all(const std::string& s, const std::string& from, const std::string& to);

// Optional fields; a present one of the wrong type throws kvscope::Error naming `where` and the key.
std::string json_str(const nlohmann::json& j, const char* key, const std::string& where,
                     const std::string& fallback = "");
bool json_bool(const nlohmann::json& j, const char* key, const std::string& where, bool fallback);

using Normalizer = std::function<std::string(const std::string&)>;

// A piece of text and whether it starts the whole input (Metaspace's "first").
struct Piece {
  std::string text;
  bool at_start;
};
using PreTokenizer = std::function<void(std::vector<Piece>&)>;

struct PreTokenizerInfo {
  bool byte_level = false;  // a ByteLevel step: entries are GPT-2's unicode form of bytes
};

// Throw kvscope::Error naming `where` and, for an unsupported type, the supported ones.
Normalizer parse_normalizer(const nlohmann::json& j, const std::string& where);
PreTokenizer parse_pre_tokenizer(const nlohmann::json& j, const std::string& where, PreTokenizerInfo& info);

}  // namespace kvscope::detail
