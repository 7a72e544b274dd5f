// A GGUF file's tokenizer (its tokenizer.ggml.* metadata) as a kvscope
// Tokenizer, and what the chat code needs of it (the template and the texts
// of its bos / eos tokens).
#pragma once

#include <string>

#include "model/arch/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope {

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
