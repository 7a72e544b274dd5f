// A GGUF file's tokenizer (its tokenizer.ggml.* metadata) as a kvscope
// Tokenizer, and what the chat code needs of it (the template and the texts
// of its bos / eos tokens).
#pragma once

#include <cstdint>
#include <string>

#include "model/arch/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

// llama.cpp's token types (tokenizer.ggml.token_type, one i32 per token).
namespace gguf_token {
enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
}

// The Split regexes of Llama-3's and Qwen2's tokenizer.json files, as they
// write them: what tokenizer.ggml.pre "llama-bpe" and "qwen2" stand for (read
// by tokenizer_from_gguf, recognised when a tokenizer.json is written to GGUF).
inline constexpr const char* kLlama3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline constexpr const char* kQwen2SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// tokenizer.ggml.model "gpt2" (byte-level BPE): tokenizer.ggml.tokens (in
// the vocab.json form), .merges ("a b" strings, rank order), .token_type
// (CONTROL, USER_DEFINED and UNKNOWN tokens match whole wherever they appear
// in a text, as Hugging Face's special added tokens do; UNUSED ids are left
// out), the pre-tokenizer named by tokenizer.ggml.pre (gpt-2, smollm, qwen2,
// llama-bpe: the rules of the tokenizer.json each was converted from), and
// tokenizer.ggml.add_bos_token (the bos token put before a prompt).
// tokenizer.ggml.model "llama" (SentencePiece-style BPE: pieces with U+2581,
// .scores instead of merges, <0xNN> byte pieces): as Hugging Face's Llama-2
// tokenizer.json, the merges derived from the scores as its converter does.
// Throws kvscope::Error naming the file and the key for a missing or
// malformed key, another model type or pre-tokenizer.
Tokenizer tokenizer_from_gguf(const GgufFile& f);

// The GGUF's chat template (tokenizer.chat_template) with its bos and eos
// tokens' texts; `source` is empty when the file has none.
struct GgufChatInfo {
  std::string source;
  std::string bos_token, eos_token;  // empty when the file names none
};
GgufChatInfo gguf_chat_info(const GgufFile& f);

}  // namespace kvscope
