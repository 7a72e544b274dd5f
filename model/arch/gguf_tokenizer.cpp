// The GGUF tokenizer is the tokenizer.json it was converted from, rebuilt:
// llama.cpp's converter writes a byte-level BPE's vocab (vocab.json form),
// merges and added tokens as metadata and names the pre-tokenizer by a
// short name (tokenizer.ggml.pre). The rules behind each name are the ones
// the original tokenizer.json spells out, so the file is turned back into
// that JSON and read by the one tokenizer.json implementation
// (Tokenizer::from_tokenizer_json): the same ids as the Hugging Face files.
#include "model/arch/gguf_tokenizer.h"

#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "model/core/error.h"

namespace kvscope {
namespace {

using nlohmann::json;

// llama.cpp's token types (tokenizer.ggml.token_type, one i32 per token).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Llama-3's and Qwen2's Split regexes, as their tokenizer.json files write them.
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// The normalizer and pre-tokenizer of the tokenizer.json that tokenizer.ggml.pre
// `pre` names (llama.cpp's names), and whether its BPE ignores merges (Llama-3).
void add_pre_tokenizer(const GgufFile& f, const std::string& pre, json& j) {
  j["normalizer"] = nullptr;
  if (pre == "gpt-2" || pre == "gpt2") {
    j["pre_tokenizer"] = byte_level(true);
  } else if (pre == "smollm") {
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
  } else if (pre == "qwen2") {
    j["normalizer"] = {{"type", "NFC"}};
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split(kQwen2Regex), byte_level(false)}}};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split(kLlama3Regex), byte_level(false)}}};
    j["model"]["ignore_merges"] = true;
  } else {
    throw Error(f.origin() + ": metadata \"tokenizer.ggml.pre\": found " + gguf_quote(pre) +
                ", a pre-tokenizer kvscope does not implement (expected gpt-2, smollm, qwen2 or llama-bpe)");
  }
}

// An array of strings (tokens, merges), checked.
const GgufValue& string_array(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) throw Error(f.origin() + ": metadata " + gguf_quote(key) + " is missing (expected an array of strings)");
  if (!v->is_array || v->type != GgufValueType::kString) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": expected an array of strings, found " + v->summary());
  }
  return *v;
}

// Each token's type (NORMAL when the file has no tokenizer.ggml.token_type).
std::vector<int64_t> token_types(const GgufFile& f, uint64_t n) {
  std::vector<int64_t> types(static_cast<size_t>(n), kNormal);
  const std::string key = "tokenizer.ggml.token_type";
  const GgufValue* v = f.find(key);
  if (!v) return types;
  if (!v->is_array || !v->is_integer() || v->count != n) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": expected an array of " + std::to_string(n) +
                " integers (one per token), found " + v->summary());
  }
  for (uint64_t i = 0; i < n; ++i) {
    types[i] = v->int_at(i);
    if (types[i] < kNormal || types[i] > kByte) {
      throw Error(f.origin() + ": metadata " + gguf_quote(key) + "[" + std::to_string(i) + "]: found " +
                  std::to_string(types[i]) + ", expected 1 (normal) to 6 (byte)");
    }
  }
  return types;
}

// The vocab and the added tokens (CONTROL and USER_DEFINED: matched whole,
// never normalized, as tokenizer.json's "special": true tokens).
void add_vocab(const GgufFile& f, json& j) {
  const GgufValue& tokens = string_array(f, "tokenizer.ggml.tokens");
  const std::vector<int64_t> types = token_types(f, tokens.count);
  json vocab = json::object(), added = json::array();
  std::unordered_map<std::string_view, uint64_t> seen;
  for (uint64_t i = 0; i < tokens.count; ++i) {
    if (types[i] == kUnused) continue;
    const std::string_view text = tokens.string_at(i);
    const std::string where = f.origin() + ": metadata \"tokenizer.ggml.tokens\"[" + std::to_string(i) + "]";
    if (text.empty()) throw Error(where + ": an empty token");
    if (first_invalid_utf8(std::string(text)) != std::string::npos) {
      throw Error(where + ": " + gguf_quote(text) + " is not valid UTF-8 (a byte-level vocab entry is)");
    }
    if (const auto [it, fresh] = seen.emplace(text, i); !fresh) {
      throw Error(where + ": " + gguf_quote(text) + " is also token " + std::to_string(it->second) +
                  " (expected each token once)");
    }
    if (types[i] == kControl || types[i] == kUserDefined) {
      added.push_back({{"id", i},
                       {"content", std::string(text)},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    } else {
      vocab[std::string(text)] = i;
    }
  }
  j["model"]["vocab"] = std::move(vocab);
  j["added_tokens"] = std::move(added);
}

// tokenizer.ggml.add_bos_token: the bos token before every prompt, as a
// TemplateProcessing post-processor puts it.
void add_bos_prefix(const GgufFile& f, json& j) {
  const GgufValue* add = f.find("tokenizer.ggml.add_bos_token");
  if (!add || add->is_array || add->type != GgufValueType::kBool || !add->bool_at(0)) return;
  const uint64_t bos = f.meta_uint("tokenizer.ggml.bos_token_id");
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "bos"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"bos", {{"id", "bos"}, {"ids", {bos}}, {"tokens", {"bos"}}}}}}};
}

// A message of the tokenizer.json reader with the GGUF keys its fields came from.
std::string with_gguf_keys(std::string msg) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"model.merges", "tokenizer.ggml.merges"},
                                 {"model.vocab", "tokenizer.ggml.tokens"},
                                 {"post_processor", "tokenizer.ggml.bos_token_id"}}) {
    for (size_t at = msg.find(from); at != std::string::npos; at = msg.find(from, at + to.size()))
      msg.replace(at, from.size(), to);
  }
  return msg;
}

}  // namespace

Tokenizer tokenizer_from_gguf(const GgufFile& f) {
  const std::string type = f.meta_string("tokenizer.ggml.model");
  if (type != "gpt2") {
    throw Error(f.origin() + ": metadata \"tokenizer.ggml.model\": found " + gguf_quote(type) +
                (type == "llama" ? " (a SentencePiece vocabulary with scores)" : "") +
                ", a tokenizer kvscope does not read from GGUF files yet (expected \"gpt2\", byte-level BPE)");
  }
  std::string pre = "gpt-2";
  if (f.find("tokenizer.ggml.pre")) {
    pre = f.meta_string("tokenizer.ggml.pre");
  } else if (f.meta_string("general.architecture") != "gpt2") {
    throw Error(f.origin() +
                ": metadata \"tokenizer.ggml.pre\" is missing (expected the pre-tokenizer's name: "
                "gpt-2, smollm, qwen2 or llama-bpe)");
  }
  json j = json::object();
  j["model"] = {{"type", "BPE"}, {"byte_fallback", false}};
  add_pre_tokenizer(f, pre, j);
  j["decoder"] = byte_level(true);
  add_vocab(f, j);
  const GgufValue& merges = string_array(f, "tokenizer.ggml.merges");
  json list = json::array();
  for (uint64_t i = 0; i < merges.count; ++i) list.push_back(std::string(merges.string_at(i)));
  j["model"]["merges"] = std::move(list);
  add_bos_prefix(f, j);
  try {
    return Tokenizer::from_tokenizer_json(j.dump(), f.origin());
  } catch (const Error& e) {
    throw Error(with_gguf_keys(e.what()));
  }
}

GgufChatInfo gguf_chat_info(const GgufFile& f) {
  GgufChatInfo info;
  if (f.find("tokenizer.chat_template")) info.source = f.meta_string("tokenizer.chat_template");
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  auto text_of = [&](const char* key) -> std::string {
    if (!f.find(key) || !tokens || !tokens->is_array || tokens->type != GgufValueType::kString) return "";
    const uint64_t id = f.meta_uint(key);
    if (id >= tokens->count) {
      throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": found " + std::to_string(id) +
                  ", expected a token id below " + std::to_string(tokens->count));
    }
    return std::string(tokens->string_at(id));
  };
  info.bos_token = text_of("tokenizer.ggml.bos_token_id");
  info.eos_token = text_of("tokenizer.ggml.eos_token_id");
  return info;
}

}  // namespace kvscope
