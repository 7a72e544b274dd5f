// The GGUF tokenizer is the tokenizer.json it was converted from, rebuilt:
// llama.cpp's converter writes a BPE's vocab, merges (or, for SentencePiece,
// scores) and added tokens as metadata and names a byte-level BPE's
// pre-tokenizer by a short name (tokenizer.ggml.pre). The rules behind each
// name are the ones the original tokenizer.json spells out, so the file is
// turned back into that JSON and read by the one tokenizer.json
// implementation (Tokenizer::from_tokenizer_json): the same ids as the
// Hugging Face files.
#include "model/arch/gguf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "model/core/error.h"
#include "model/tokenizer/tokenizer_rules.h"  // detail::char_len

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

// The vocab and the added tokens (CONTROL, USER_DEFINED and UNKNOWN: matched
// whole, never normalized, as tokenizer.json's "special": true tokens; a
// SentencePiece vocab lists them in its vocab too, as Hugging Face's files do).
void add_vocab(const GgufFile& f, const std::vector<int64_t>& types, bool sentencepiece, json& j) {
  const GgufValue& tokens = string_array(f, "tokenizer.ggml.tokens");
  json vocab = json::object(), added = json::array();
  std::unordered_map<std::string_view, uint64_t> seen;
  for (uint64_t i = 0; i < tokens.count; ++i) {
    if (types[i] == kUnused) continue;
    const std::string_view text = tokens.string_at(i);
    const std::string where = f.origin() + ": metadata \"tokenizer.ggml.tokens\"[" + std::to_string(i) + "]";
    if (text.empty()) throw Error(where + ": an empty token");
    if (first_invalid_utf8(std::string(text)) != std::string::npos) {
      throw Error(where + ": " + gguf_quote(text) + " is not valid UTF-8");
    }
    if (const auto [it, fresh] = seen.emplace(text, i); !fresh) {
      throw Error(where + ": " + gguf_quote(text) + " is also token " + std::to_string(it->second) +
                  " (expected each token once)");
    }
    const bool special = types[i] == kControl || types[i] == kUserDefined || types[i] == kUnknown;
    if (special) {
      added.push_back({{"id", i},
                       {"content", std::string(text)},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
    if (!special || sentencepiece) vocab[std::string(text)] = i;
  }
  j["model"]["vocab"] = std::move(vocab);
  j["added_tokens"] = std::move(added);
}

// A bool key, `fallback` when absent.
bool meta_bool(const GgufFile& f, const std::string& key, bool fallback) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  if (v->is_array || v->type != GgufValueType::kBool) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": expected a bool, found " + v->summary());
  }
  return v->bool_at(0);
}

// SentencePiece's BPE keeps scores, not merges: Hugging Face's converter
// (SentencePieceExtractor) makes a merge (l, r) of every split of a piece
// into two pieces, ordered by the piece's score, highest first (a piece's
// splits by the ids of l, then r). llama.cpp merges by the same scores.
json merges_from_scores(const GgufFile& f, const std::vector<int64_t>& types) {
  const GgufValue& tokens = string_array(f, "tokenizer.ggml.tokens");
  const std::string key = "tokenizer.ggml.scores";
  const GgufValue* scores = f.find(key);
  if (!scores || !scores->is_array || !scores->is_float() || scores->count != tokens.count) {
    throw Error(f.origin() + ": metadata " + gguf_quote(key) + ": expected an array of " +
                std::to_string(tokens.count) + " floats (one per token), found " +
                (scores ? scores->summary() : std::string("none")));
  }
  std::unordered_map<std::string_view, uint64_t> id;
  for (uint64_t i = 0; i < tokens.count; ++i)
    if (types[i] != kUnused) id.emplace(tokens.string_at(i), i);
  struct M {
    uint64_t l, r;
    double score;
  };
  std::vector<M> merges;
  for (uint64_t i = 0; i < tokens.count; ++i) {
    if (types[i] == kUnused) continue;
    const std::string_view t = tokens.string_at(i);
    const std::string text(t);
    std::vector<M> local;
    for (size_t at = detail::char_len(text, 0); at < t.size(); at += detail::char_len(text, at)) {
      auto l = id.find(t.substr(0, at)), r = id.find(t.substr(at));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, scores->number_at(i)});
    }
    std::sort(local.begin(), local.end(), [](const M& a, const M& b) { return a.l != b.l ? a.l < b.l : a.r < b.r; });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const M& a, const M& b) { return a.score > b.score; });
  json list = json::array();
  for (const M& m : merges) list.push_back({std::string(tokens.string_at(m.l)), std::string(tokens.string_at(m.r))});
  return list;
}

// tokenizer.ggml.model "llama": SentencePiece-style BPE as Hugging Face's
// Llama-2 tokenizer.json spells it: a space prefix (add_space_prefix, on
// unless the file says otherwise), spaces as U+2581, byte fallback to
// <0xNN> tokens, unknown pieces fused into one <unk>.
void add_sentencepiece(const GgufFile& f, const std::vector<int64_t>& types, json& j) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}};
  const bool prefix = meta_bool(f, "tokenizer.ggml.add_space_prefix", true);
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  if (prefix) j["normalizer"]["normalizers"].push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
  j["normalizer"]["normalizers"].push_back(replace);
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", prefix ? 1 : 0}, {"stop", 0}}}}};
  j["model"]["byte_fallback"] = true;
  j["model"]["fuse_unk"] = true;
  add_vocab(f, types, true, j);
  for (uint64_t i = 0; i < types.size(); ++i)
    if (types[i] == kUnknown)
      j["model"]["unk_token"] = std::string(string_array(f, "tokenizer.ggml.tokens").string_at(i));
  j["model"]["merges"] = merges_from_scores(f, types);
}

// tokenizer.ggml.model "gpt2": byte-level BPE with the file's merges and the
// pre-tokenizer tokenizer.ggml.pre names.
void add_byte_level(const GgufFile& f, const std::vector<int64_t>& types, json& j) {
  std::string pre = "gpt-2";
  if (f.find("tokenizer.ggml.pre")) {
    pre = f.meta_string("tokenizer.ggml.pre");
  } else if (f.meta_string("general.architecture") != "gpt2") {
    throw Error(f.origin() +
                ": metadata \"tokenizer.ggml.pre\" is missing (expected the pre-tokenizer's name: "
                "gpt-2, smollm, qwen2 or llama-bpe)");
  }
  add_pre_tokenizer(f, pre, j);
  j["decoder"] = byte_level(true);
  add_vocab(f, types, false, j);
  const GgufValue& merges = string_array(f, "tokenizer.ggml.merges");
  json list = json::array();
  for (uint64_t i = 0; i < merges.count; ++i) {
    const std::string m(merges.string_at(i));
    if (first_invalid_utf8(m) != std::string::npos) {
      throw Error(f.origin() + ": metadata \"tokenizer.ggml.merges\"[" + std::to_string(i) + "]: " + gguf_quote(m) +
                  " is not valid UTF-8");
    }
    list.push_back(m);
  }
  j["model"]["merges"] = std::move(list);
}

// tokenizer.ggml.add_bos_token: the bos token before every prompt, as a
// TemplateProcessing post-processor puts it.
void add_bos_prefix(const GgufFile& f, bool fallback, json& j) {
  if (!meta_bool(f, "tokenizer.ggml.add_bos_token", fallback) || !f.find("tokenizer.ggml.bos_token_id")) return;
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
  if (type != "gpt2" && type != "llama") {
    throw Error(f.origin() + ": metadata \"tokenizer.ggml.model\": found " + gguf_quote(type) +
                ", a tokenizer kvscope does not read from GGUF files (expected \"gpt2\", byte-level BPE, or "
                "\"llama\", SentencePiece-style BPE)");
  }
  const std::vector<int64_t> types = token_types(f, string_array(f, "tokenizer.ggml.tokens").count);
  json j = json::object();
  j["model"] = {{"type", "BPE"}, {"byte_fallback", false}};
  if (type == "llama") {
    add_sentencepiece(f, types, j);
  } else {
    add_byte_level(f, types, j);
  }
  add_bos_prefix(f, type == "llama", j);  // llama.cpp's defaults: SentencePiece vocabs add bos
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
