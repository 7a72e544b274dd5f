// GPT-2 byte-level BPE: vocab.json + merges.txt, GPT-2's pre-tokenizer
// pattern and bytes<->unicode table. Headless, no model weights needed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope {

class Tokenizer {
 public:
  // Loads `dir`/vocab.json and `dir`/merges.txt. Throws kvscope::Error.
  static Tokenizer load(const std::string& dir);
  // From in-memory file contents; `origin` names them in errors.
  static Tokenizer from_strings(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& origin);

  // Any byte string (valid UTF-8 or not) -> ids. Never throws on content.
  std::vector<int> encode(const std::string& text) const;
  // ids -> raw bytes (may be incomplete UTF-8 at token boundaries).
  std::string decode(const std::vector<int>& ids) const;
  // Raw bytes of one token; empty for an unknown id.
  std::string token_bytes(int id) const;
  // Printable form of one token: its bytes where they are complete UTF-8,
  // invalid/partial bytes escaped as \xNN. Safe to draw anywhere.
  std::string display_piece(int id) const;

  int vocab_size() const { return static_cast<int>(id_to_bytes_.size()); }
  // Id of a vocabulary entry given in its GPT-2 unicode form (e.g. "<|endoftext|>"), -1 if absent.
  int token_id(const std::string& vocab_entry) const;

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

  // BPE of one pre-token (raw bytes); appends its ids to `out`. Stateless, so encode() is thread-safe.
  void bpe(const char* word, std::size_t len, std::vector<int>& out) const;
};

// Splits text into pre-tokens with GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Invalid UTF-8 bytes are treated as single "other" characters.
std::vector<std::string> pretokenize(const std::string& text);

// Escapes bytes that are not part of complete UTF-8 sequences as \xNN.
std::string escape_invalid_utf8(const std::string& bytes);

}  // namespace kvscope
