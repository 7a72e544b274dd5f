// Hugging Face tokenizer.json for BPE models, as the `tokenizers` library runs
// it: added tokens are split out of the raw text first; each remaining
// section is normalized (NFC, Prepend, Replace, ...), pre-tokenized (Split
// with a regex, ByteLevel, Digits, Metaspace) and BPE-encoded piece by piece.
// Two families of vocabularies:
//  - byte-level BPE (a ByteLevel pre-tokenizer or decoder: GPT-2, SmolLM2,
//    Qwen2, Llama-3): entries are GPT-2's unicode form of bytes;
//  - SentencePiece-style BPE (TinyLlama, Llama-2, Mistral): entries are text
//    with U+2581 for spaces, and <0xXX> tokens for bytes of characters
//    outside the vocabulary (byte_fallback).
// The normalizers and pre-tokenizers are in tokenizer_rules.cpp.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "error.h"
#include "tokenizer.h"
#include "tokenizer_detail.h"
#include "tokenizer_rules.h"

namespace kvscope {
namespace {

using nlohmann::json;
using namespace detail;

// <0xXX> -> XX, -1 if `entry` is not a byte token.
int byte_token_value(const std::string& entry) {
  if (entry.size() != 6 || entry.compare(0, 3, "<0x") != 0 || entry[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(entry[3]), lo = hex(entry[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

struct Tokenizer::Pipeline {
  struct Added {
    std::string content;
    int id;
    bool lstrip, rstrip;
  };
  std::vector<Added> added;  // longest content first, so the longest match wins at a position
  Normalizer normalizer;     // empty: none
  PreTokenizer pre;          // empty: none
  bool byte_level = false;
  bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
  int unk_id = -1;
  std::array<int, 256> fallback_id{};  // byte -> id of <0xXX>, -1 if absent
};

namespace {

// Reads the "model" section's vocab into `entries` (entry, id).
std::vector<std::pair<std::string, int>> read_vocab(const json& model, const std::string& where) {
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty()) {
    throw Error(where + ".vocab: expected a non-empty object {\"token\": id, ...}");
  }
  std::vector<std::pair<std::string, int>> entries;
  entries.reserve(model["vocab"].size());
  for (const auto& [entry, value] : model["vocab"].items()) {
    if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() >= (1 << 24)) {
      throw Error(where + ".vocab: entry \"" + escape_invalid_utf8(entry) + "\" has id " + value.dump() +
                  "; expected an integer in [0, 16777215]");
    }
    entries.emplace_back(entry, value.get<int>());
  }
  return entries;
}

// A merge as "a b" or ["a", "b"].
std::pair<std::string, std::string> read_merge(const json& m, const std::string& where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const std::size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos) {
      throw Error(where + ": expected \"a b\" (two tokens, one space), got " + m.dump());
    }
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  throw Error(where + ": expected \"a b\" or [\"a\", \"b\"], got " + m.dump());
}

void check_model_options(const json& model, const std::string& where) {
  const std::string type = model.contains("type") ? json_str(model, "type", where) : "BPE";
  if (type != "BPE") {
    throw Error(where + ": model type \"" + type +
                "\" is not supported (only BPE; WordPiece, Unigram, WordLevel are not)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    throw Error(where + ": BPE dropout " + model["dropout"].dump() + " is not supported (expected null)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!json_str(model, key, where).empty()) {
      throw Error(where + ": \"" + key + "\" is not supported (expected null; used by non-GPT BPE variants)");
    }
  }
}

// The id a TemplateProcessing post-processor puts first for a single text, -1 if none.
int template_bos(const json& pp, const std::string& where) {
  if (!pp.is_object()) return -1;
  const std::string t = json_str(pp, "type", where);
  if (t == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) {
      const int id = template_bos(p, where);
      if (id >= 0) return id;
    }
    return -1;
  }
  if (t != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array() || pp["single"].empty()) {
    return -1;
  }
  const json& first = pp["single"][0];
  if (!first.is_object() || !first.contains("SpecialToken")) return -1;
  const std::string name = json_str(first["SpecialToken"], "id", where);
  const json& specials = pp.value("special_tokens", json::object());
  if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array() ||
      specials[name]["ids"].empty() || !specials[name]["ids"][0].is_number_integer()) {
    throw Error(where + ": special token \"" + name + "\" of the template has no ids");
  }
  return specials[name]["ids"][0].get<int>();
}

}  // namespace

// (A field of an unexpected JSON type anywhere below is reported naming the
// file, like every other error, not as a JSON library message.)
Tokenizer Tokenizer::from_tokenizer_json(const std::string& json_text, const std::string& origin) try {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw Error(origin + ": expected a Hugging Face tokenizer.json object with a \"model\" section");
  }
  auto pipe = std::make_shared<Pipeline>();
  PreTokenizerInfo info;
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    pipe->normalizer = parse_normalizer(j["normalizer"], origin + ": normalizer");
  }
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
    pipe->pre = parse_pre_tokenizer(j["pre_tokenizer"], origin + ": pre_tokenizer", info);
  }
  if (j.contains("decoder") && j["decoder"].is_object() && j["decoder"].value("type", "") == "ByteLevel") {
    info.byte_level = true;
  }
  pipe->byte_level = info.byte_level;
  const json& model = j["model"];
  const std::string mwhere = origin + ": model";
  check_model_options(model, mwhere);
  pipe->byte_fallback = json_bool(model, "byte_fallback", mwhere, false);
  pipe->ignore_merges = json_bool(model, "ignore_merges", mwhere, false);
  pipe->fuse_unk = json_bool(model, "fuse_unk", mwhere, false);

  Tokenizer tok;
  tok.kind_ = pipe->byte_level ? "tokenizer.json, byte-level BPE"
                               : std::string("tokenizer.json, SentencePiece-style BPE") +
                                     (pipe->byte_fallback ? " with byte fallback" : "");
  std::vector<std::pair<std::string, int>> entries = read_vocab(model, mwhere);
  // Added tokens share the id space (and may repeat vocab entries).
  const json& added = j.value("added_tokens", json::array());
  if (!added.is_array()) throw Error(origin + ": \"added_tokens\" must be a list");
  for (std::size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string where = origin + ": added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<long long>() < 0 ||
        a["id"].get<long long>() >= (1 << 24)) {
      throw Error(where + ": expected {\"id\": 0.., \"content\": \"...\"}");
    }
    const std::string content = json_str(a, "content", where);
    if (content.empty()) throw Error(where + ": empty \"content\"");
    if (json_bool(a, "single_word", where, false)) {
      throw Error(where + ": \"single_word\": true is not supported");
    }
    pipe->added.push_back(
        {content, a["id"].get<int>(), json_bool(a, "lstrip", where, false), json_bool(a, "rstrip", where, false)});
  }
  std::stable_sort(pipe->added.begin(), pipe->added.end(), [](const Pipeline::Added& x, const Pipeline::Added& y) {
    return x.content.size() > y.content.size();
  });

  long long max_id = -1;
  for (const auto& e : entries) max_id = std::max<long long>(max_id, e.second);
  for (const auto& a : pipe->added) max_id = std::max<long long>(max_id, a.id);
  const long long allowed = static_cast<long long>(entries.size() + pipe->added.size()) + 1024;
  if (max_id > allowed) {
    throw Error(origin + ": largest id is " + std::to_string(max_id) + " for " +
                std::to_string(entries.size() + pipe->added.size()) +
                " entries; expected ids numbered from 0 without large gaps");
  }
  tok.id_to_bytes_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  std::vector<bool> used(static_cast<std::size_t>(max_id + 1), false);
  pipe->fallback_id.fill(-1);
  for (const auto& [entry, id] : entries) {
    if (used[static_cast<std::size_t>(id)]) {
      throw Error(mwhere + ".vocab: id " + std::to_string(id) + " is used by two entries (one is \"" +
                  escape_invalid_utf8(entry) + "\"); expected unique ids");
    }
    used[static_cast<std::size_t>(id)] = true;
    std::string bytes;
    const int b = pipe->byte_level ? -1 : byte_token_value(entry);
    if (pipe->byte_level) {
      bytes = detail::byte_level_entry_to_bytes(entry);
    } else if (b >= 0 && pipe->byte_fallback) {
      bytes = std::string(1, static_cast<char>(b));
      pipe->fallback_id[static_cast<std::size_t>(b)] = id;
    } else {
      bytes = replace_all(entry, "\xE2\x96\x81", " ");
    }
    tok.vocab_entry_to_id_.emplace(entry, id);
    tok.bytes_to_id_.emplace(bytes, id);
    tok.id_to_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  for (const auto& a : pipe->added) {
    tok.vocab_entry_to_id_[a.content] = a.id;
    tok.id_to_bytes_[static_cast<std::size_t>(a.id)] = a.content;
  }
  if (pipe->byte_level) {
    for (int b = 0; b < 256; ++b) {
      auto it = tok.vocab_entry_to_id_.find(detail::byte_level_entry(static_cast<unsigned char>(b)));
      if (it == tok.vocab_entry_to_id_.end()) {
        throw Error(mwhere + ".vocab: no token for byte " + std::to_string(b) +
                    "; a byte-level BPE vocab needs all 256 single-byte tokens");
      }
      tok.byte_id_[static_cast<std::size_t>(b)] = it->second;
    }
  }
  const std::string unk = json_str(model, "unk_token", mwhere);
  if (!unk.empty()) {
    auto it = tok.vocab_entry_to_id_.find(unk);
    if (it == tok.vocab_entry_to_id_.end()) throw Error(mwhere + ": unk_token \"" + unk + "\" is not in the vocab");
    pipe->unk_id = it->second;
  }

  const json& merges = model.value("merges", json::array());
  if (!merges.is_array()) throw Error(mwhere + ".merges: expected a list");
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string where = mwhere + ".merges[" + std::to_string(i) + "]";
    const auto [a, b] = read_merge(merges[i], where);
    const int missing = tok.add_merge(a, b, static_cast<int>(i));
    if (missing >= 0) {
      throw Error(where + ": " + (missing < 2 ? "token \"" + (missing ? b : a) : "merged token \"" + a + b) +
                  "\" is not in the vocab; expected every merge part and result in the vocab");
    }
  }
  tok.bos_prefix_id_ = template_bos(j.value("post_processor", json()), origin + ": post_processor");
  if (tok.bos_prefix_id_ >= tok.vocab_size()) {
    throw Error(origin + ": post_processor: id " + std::to_string(tok.bos_prefix_id_) + " is outside the vocab");
  }
  tok.pipeline_ = std::move(pipe);
  return tok;
} catch (const json::exception& e) {
  throw Error(origin + ": a field has an unexpected type or value (" + e.what() + ")");
}

std::vector<int> Tokenizer::encode_pipeline(const std::string& raw) const {
  const Pipeline& p = *pipeline_;
  const std::string text = to_valid_utf8(raw);
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  // Added tokens first, on the raw text: leftmost match, the longest at a position.
  auto encode_section = [&](std::size_t b, std::size_t e) {
    if (e <= b) return;
    std::string s = text.substr(b, e - b);
    if (p.normalizer) s = p.normalizer(s);
    if (s.empty()) return;
    std::vector<Piece> pieces{{std::move(s), b == 0}};
    if (p.pre) p.pre(pieces);
    for (const Piece& piece : pieces) encode_piece(piece.text, ids);
  };
  std::size_t pos = 0, section = 0;
  while (pos < text.size()) {
    const Pipeline::Added* hit = nullptr;
    std::size_t at = std::string::npos;
    for (const Pipeline::Added& a : p.added) {
      const std::size_t f = text.find(a.content, pos);
      if (f < at) {
        at = f;
        hit = &a;
      }
    }
    if (!hit) break;
    std::size_t end = at + hit->content.size(), before = at;
    // lstrip / rstrip: the token absorbs the whitespace beside it.
    if (hit->lstrip) {
      while (before > section) {
        std::size_t k = before - 1;
        while (k > section && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        if (!is_white_space(char_at(text, k))) break;
        before = k;
      }
    }
    if (hit->rstrip) {
      while (end < text.size() && is_white_space(char_at(text, end))) end += char_len(text, end);
    }
    encode_section(section, before);
    ids.push_back(hit->id);
    pos = section = end;
  }
  encode_section(section, text.size());
  return ids;
}

void Tokenizer::encode_piece(const std::string& piece, std::vector<int>& out) const {
  const Pipeline& p = *pipeline_;
  if (p.byte_level) {
    if (p.ignore_merges) {
      auto it = bytes_to_id_.find(piece);
      if (it != bytes_to_id_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    bpe(piece.data(), piece.size(), out);
    return;
  }
  if (p.ignore_merges) {
    auto it = vocab_entry_to_id_.find(piece);
    if (it != vocab_entry_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Initial symbols: one per character; a character outside the vocab becomes
  // its <0xXX> byte tokens (byte_fallback) or the unknown token.
  std::vector<int> sym;
  sym.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t n = char_len(piece, i);
    auto it = vocab_entry_to_id_.find(piece.substr(i, n));
    if (it != vocab_entry_to_id_.end()) {
      sym.push_back(it->second);
    } else {
      bool bytes_ok = p.byte_fallback;
      for (std::size_t k = i; k < i + n && bytes_ok; ++k) {
        bytes_ok = p.fallback_id[static_cast<unsigned char>(piece[k])] >= 0;
      }
      if (bytes_ok) {
        for (std::size_t k = i; k < i + n; ++k) sym.push_back(p.fallback_id[static_cast<unsigned char>(piece[k])]);
      } else if (p.unk_id >= 0 && !(p.fuse_unk && !sym.empty() && sym.back() == p.unk_id)) {
        sym.push_back(p.unk_id);
      }
    }
    i += n;
  }
  if (!sym.empty()) bpe_symbols(sym.data(), sym.size(), out);
}

}  // namespace kvscope
