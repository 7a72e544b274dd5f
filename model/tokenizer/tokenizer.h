// BPE tokenizers: GPT-2's vocab.json + merges.txt (GPT-2's pre-tokenizer
// pattern and bytes<->unicode table), and Hugging Face tokenizer.json files
// for BPE models (byte-level BPE as in SmolLM2, Qwen2, Llama-3; SentencePiece
// -style BPE with U+2581 and byte fallback as in TinyLlama, Mistral).
// Headless, no model weights needed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope {

class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json when present, else `dir`/vocab.json and
  // `dir`/merges.txt. Throws kvscope::Error.
  static Tokenizer load(const std::string& dir);
  // From in-memory file contents; `origin` names them in errors.
  static Tokenizer from_strings(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& origin);
  // A Hugging Face tokenizer.json (BPE model). Refuses, naming them, the
  // model types, normalizers and pre-tokenizers it does not implement.
  static Tokenizer from_tokenizer_json(const std::string& json_text, const std::string& origin);

  // Any byte string (valid UTF-8 or not) -> ids. Never throws on content.
  std::vector<int> encode(const std::string& text) const;
  // A prompt as the model was trained to see a text: encode() with the
  // post-processor's leading token (bos_prefix_id()) in front, if any.
  // The prompt rule, the same for both families: a prompt is UTF-8 text.
  // Invalid UTF-8 throws UsageError naming --prompt and the first invalid
  // byte (require_utf8), rather than becoming U+FFFD (tokenizer.json) or
  // raw byte tokens (GPT-2's vocab.json) silently.
  std::vector<int> encode_prompt(const std::string& text) const;
  // ids -> raw bytes (may be incomplete UTF-8 at token boundaries): the
  // tokens' bytes concatenated, as a continuation of earlier text reads them.
  std::string decode(const std::vector<int>& ids) const;
  // ids read as a whole text, as Hugging Face's decoder returns it: decode()
  // plus the tokenizer.json decoder's trimming (SentencePiece-style files
  // strip the space their normalizer put in front, so decode_text(encode(s))
  // == s). Same as decode() for GPT-2 and byte-level files.
  std::string decode_text(const std::vector<int>& ids) const;
  // Raw bytes of one token; empty for an unknown id.
  std::string token_bytes(int id) const;
  // Printable form of one token: its bytes where they are complete UTF-8,
  // invalid/partial bytes escaped as \xNN. Safe to draw anywhere.
  std::string display_piece(int id) const;

  int vocab_size() const { return static_cast<int>(id_to_bytes_.size()); }
  // Id of a vocabulary entry as written in the vocab file (GPT-2's unicode
  // form, e.g. "<|endoftext|>" or "\u0120the"; "\u2581the" for SentencePiece
  // -style vocabularies; added tokens by their content), -1 if absent.
  int token_id(const std::string& vocab_entry) const;
  // The token a tokenizer.json's post-processor puts before a single text
  // (e.g. <s>, <|begin_of_text|>), -1 if none. encode() never adds it.
  int bos_prefix_id() const { return bos_prefix_id_; }
  // One line naming the format, e.g. "tokenizer.json, byte-level BPE".
  const std::string& kind() const { return kind_; }

  // tokenizer.json's normalizer, pre-tokenizer, added tokens, decoder trimming
  // and BPE options (defined in tokenizer_json.cpp); null for GPT-2's
  // vocab.json + merges.txt.
  struct Pipeline;

 private:
  // A merge rule "a b": its rank (line order, lower merges first) and the id of "ab".
  struct Merge {
    int rank;
    int merged_id;
  };

  std::vector<std::string> id_to_bytes_;                    // (vocab) raw bytes; empty for ids absent from vocab.json
  std::unordered_map<std::string, int> bytes_to_id_;        // raw bytes -> id
  std::unordered_map<std::string, int> vocab_entry_to_id_;  // unicode form -> id
  std::unordered_map<std::uint64_t, Merge> merges_;         // (id_a << 32 | id_b) -> merge
  std::array<int, 256> byte_id_{};                          // byte value -> id of its single-byte token
  int bos_prefix_id_ = -1;
  std::string kind_ = "vocab.json + merges.txt, GPT-2 byte-level BPE";
  std::shared_ptr<const Pipeline> pipeline_;

  // BPE of one pre-token (raw bytes); appends its ids to `out`. Stateless, so encode() is thread-safe.
  void bpe(const char* word, std::size_t len, std::vector<int>& out) const;
  // BPE from initial symbols `sym` (n ids, overwritten); appends the result to `out`.
  void bpe_symbols(int* sym, std::size_t n, std::vector<int>& out) const;
  // Records merge `a b` (vocab entries) at `rank`. Returns -1, or which entry
  // is not in the vocab: 0 (a), 1 (b), 2 (the merged ab).
  int add_merge(const std::string& a, const std::string& b, int rank);
  // tokenizer.json only: the id tables from (entry, id) of the vocab and the
  // added tokens; throws naming `origin` (the file) or `mwhere` (its model section).
  void fill_ids(const std::vector<std::pair<std::string, int>>& entries,
                const std::vector<std::pair<std::string, int>>& added, Pipeline& pipe, const std::string& origin,
                const std::string& mwhere);
  std::vector<int> encode_pipeline(const std::string& text) const;
  void encode_piece(const std::string& piece, std::vector<int>& out) const;
};

// Splits text into pre-tokens with GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Invalid UTF-8 bytes are treated as single "other" characters.
std::vector<std::string> pretokenize(const std::string& text);

// Escapes bytes that are not part of complete UTF-8 sequences as \xNN.
std::string escape_invalid_utf8(const std::string& bytes);

// Offset of the first byte that starts no valid UTF-8 character (overlong
// forms, surrogates and code points above U+10FFFF are invalid), npos if none.
std::size_t first_invalid_utf8(const std::string& text);
// The one text rule for what a user hands the tokenizer (a prompt, tokenize's
// --text): valid UTF-8. Throws UsageError "WHAT: byte N (0xXX) is not valid
// UTF-8 ...", N counted from 0.
void require_utf8(const std::string& text, const std::string& what);

}  // namespace kvscope
