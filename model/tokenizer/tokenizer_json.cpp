// Hugging Face tokenizer.json for BPE models, as the `tokenizers` library runs
// it: added tokens with "normalized": false (special tokens) are split out of
// the raw text first; each remaining section is normalized (NFC, Prepend,
// Replace, ...), the added tokens with "normalized": true are split out of the
// normalized text (matched in their normalized form), and what remains is
// pre-tokenized (Split with a regex, ByteLevel, Digits, Metaspace) and
// BPE-encoded piece by piece. lstrip / rstrip / single_word as the library's
// AddedVocabulary applies them.
// Two families of vocabularies:
//  - byte-level BPE (a ByteLevel pre-tokenizer or decoder: GPT-2, SmolLM2,
//    Qwen2, Llama-3): entries are GPT-2's unicode form of bytes;
//  - SentencePiece-style BPE (TinyLlama, Llama-2, Mistral): entries are text
//    with U+2581 for spaces, and <0xXX> tokens for bytes of characters
//    outside the vocabulary (byte_fallback).
// The normalizers and pre-tokenizers are in tokenizer_rules.cpp.
#include <utf8proc.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/tokenizer_detail.h"
#include "model/tokenizer/tokenizer_rules.h"

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

// The \w of Rust's regex crate (what single_word tests against): Alphabetic,
// marks, decimal digits, connector punctuation and the two joiners.
bool is_word_char(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Start of the UTF-8 character that ends just before s[i] (i > 0).
std::size_t prev_char_start(const std::string& s, std::size_t i) {
  std::size_t k = i - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return k;
}

}  // namespace

struct Tokenizer::Pipeline {
  struct Added {
    std::string content;  // as matched: normalized by `normalizer` for a "normalized" token
    int id;
    bool lstrip, rstrip, single_word;
  };
  // Longest content first, so the longest match wins at a position.
  std::vector<Added> added;       // "normalized": false, matched on the raw text
  std::vector<Added> normalized;  // "normalized": true, matched on each normalized section
  Normalizer normalizer;          // empty: none
  PreTokenizer pre;               // empty: none
  bool byte_level = false;
  bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
  int unk_id = -1;
  std::array<int, 256> fallback_id{};  // byte -> id of <0xXX>, -1 if absent
  // The decoder's trimming of a whole text (decode_text): a Strip decoder
  // removes up to `strip_start` / `strip_stop` copies of `strip_char` at the
  // ends; a Metaspace decoder removes the first token's leading space.
  std::string strip_char = " ";
  int strip_start = 0, strip_stop = 0;
  bool metaspace_first = false;
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
      throw Error(where + ".vocab: entry \"" + escape_invalid_utf8(entry) + "\" has id " + json_quote(value) +
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
      throw Error(where + ": expected \"a b\" (two tokens, one space), got " + json_quote(m));
    }
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  throw Error(where + ": expected \"a b\" or [\"a\", \"b\"], got " + json_quote(m));
}

void check_model_options(const json& model, const std::string& where) {
  const std::string type = model.contains("type") ? json_str(model, "type", where) : "BPE";
  if (type != "BPE") {
    throw Error(where + ": model type \"" + type +
                "\" is not supported (only BPE; WordPiece, Unigram, WordLevel are not)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    throw Error(where + ": BPE dropout " + json_quote(model["dropout"]) + " is not supported (expected null)");
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

// The decoder steps that change a whole text beyond the tokens' bytes (which
// already are what Replace(U+2581 -> " "), ByteFallback, Fuse and ByteLevel
// give): Strip, and Metaspace's removal of the first token's leading space.
// Other steps are accepted as they are.
void parse_decoder(const json& d, const std::string& where, Tokenizer::Pipeline& p, PreTokenizerInfo& info) {
  if (!d.is_object()) throw Error(where + ": expected an object with a \"type\"");
  const std::string type = json_str(d, "type", where);
  if (type == "Sequence") {
    const json& list = d.value("decoders", json::array());
    if (!list.is_array()) throw Error(where + ".decoders: expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      parse_decoder(list[i], where + ".decoders[" + std::to_string(i) + "]", p, info);
    }
  } else if (type == "ByteLevel") {
    info.byte_level = true;
  } else if (type == "Strip") {
    p.strip_char = json_str(d, "content", where, " ");
    if (p.strip_char.empty() || char_len(p.strip_char, 0) != p.strip_char.size()) {
      throw Error(where + ": \"content\" must be one character, got \"" + p.strip_char + "\"");
    }
    for (const char* key : {"start", "stop"}) {
      const json& v = d.value(key, json(0));
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 1024) {
        throw Error(where + ": \"" + key + "\" must be an integer in [0, 1024], got " + json_quote(v));
      }
      (std::string(key) == "start" ? p.strip_start : p.strip_stop) = v.get<int>();
    }
  } else if (type == "Metaspace") {
    // prepend_scheme "always" / "first" strip, "never" does not; older files say add_prefix_space.
    const std::string scheme = json_str(d, "prepend_scheme", where);
    p.metaspace_first = scheme.empty() ? json_bool(d, "add_prefix_space", where, true) : scheme != "never";
  }
}

// tokenizer.json's "added_tokens": each one's (content, id) as written; the
// pipeline gets them split by whether the normalizer runs over them first,
// longest first (the order Hugging Face's AddedVocabulary matches them in).
std::vector<std::pair<std::string, int>> read_added_tokens(const json& j, const std::string& origin,
                                                           Tokenizer::Pipeline& pipe) {
  const json& added = j.value("added_tokens", json::array());
  if (!added.is_array()) throw Error(origin + ": \"added_tokens\" must be a list");
  std::vector<std::pair<std::string, int>> added_content;  // (content, id) as written
  for (std::size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string where = origin + ": added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<long long>() < 0 ||
        a["id"].get<long long>() >= (1 << 24)) {
      throw Error(where + ": expected {\"id\": 0.., \"content\": \"...\"}");
    }
    const std::string content = json_str(a, "content", where);
    if (content.empty()) throw Error(where + ": empty \"content\"");
    Tokenizer::Pipeline::Added t{content, a["id"].get<int>(), json_bool(a, "lstrip", where, false),
                                 json_bool(a, "rstrip", where, false), json_bool(a, "single_word", where, false)};
    added_content.emplace_back(content, t.id);
    // As the library defaults it: special tokens are not normalized, others are.
    if (!json_bool(a, "normalized", where, !json_bool(a, "special", where, false))) {
      pipe.added.push_back(std::move(t));
      continue;
    }
    if (pipe.normalizer) t.content = pipe.normalizer(t.content);
    if (!t.content.empty()) pipe.normalized.push_back(std::move(t));
  }
  for (auto* set : {&pipe.added, &pipe.normalized}) {
    std::stable_sort(set->begin(), set->end(),
                     [](const Tokenizer::Pipeline::Added& x, const Tokenizer::Pipeline::Added& y) {
                       return x.content.size() > y.content.size();
                     });
  }
  return added_content;
}

}  // namespace

// The id tables from the vocab's entries and the added tokens: bytes per id,
// id per vocab entry and per byte string, the byte-fallback and byte-level
// single-byte ids. (vocab) entries must have unique ids numbered from 0.
void Tokenizer::fill_ids(const std::vector<std::pair<std::string, int>>& entries,
                         const std::vector<std::pair<std::string, int>>& added_content, Pipeline& pipe,
                         const std::string& origin, const std::string& mwhere) {
  long long max_id = -1;
  for (const auto& e : entries) max_id = std::max<long long>(max_id, e.second);
  for (const auto& a : added_content) max_id = std::max<long long>(max_id, a.second);
  const long long allowed = static_cast<long long>(entries.size() + added_content.size()) + 1024;
  if (max_id > allowed) {
    throw Error(origin + ": largest id is " + std::to_string(max_id) + " for " +
                std::to_string(entries.size() + added_content.size()) +
                " entries; expected ids numbered from 0 without large gaps");
  }
  id_to_bytes_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  std::vector<bool> used(static_cast<std::size_t>(max_id + 1), false);
  pipe.fallback_id.fill(-1);
  for (const auto& [entry, id] : entries) {
    if (used[static_cast<std::size_t>(id)]) {
      throw Error(mwhere + ".vocab: id " + std::to_string(id) + " is used by two entries (one is \"" +
                  escape_invalid_utf8(entry) + "\"); expected unique ids");
    }
    used[static_cast<std::size_t>(id)] = true;
    std::string bytes;
    const int b = pipe.byte_level ? -1 : byte_token_value(entry);
    if (pipe.byte_level) {
      bytes = detail::byte_level_entry_to_bytes(entry);
    } else if (b >= 0 && pipe.byte_fallback) {
      bytes = std::string(1, static_cast<char>(b));
      pipe.fallback_id[static_cast<std::size_t>(b)] = id;
    } else {
      bytes = replace_all(entry, "\xE2\x96\x81", " ");
    }
    vocab_entry_to_id_.emplace(entry, id);
    bytes_to_id_.emplace(bytes, id);
    id_to_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  for (const auto& [content, id] : added_content) {
    vocab_entry_to_id_[content] = id;
    id_to_bytes_[static_cast<std::size_t>(id)] = content;
  }
  if (pipe.byte_level) {
    for (int b = 0; b < 256; ++b) {
      auto it = vocab_entry_to_id_.find(detail::byte_level_entry(static_cast<unsigned char>(b)));
      if (it == vocab_entry_to_id_.end()) {
        throw Error(mwhere + ".vocab: no token for byte " + std::to_string(b) +
                    "; a byte-level BPE vocab needs all 256 single-byte tokens");
      }
      byte_id_[static_cast<std::size_t>(b)] = it->second;
    }
  }
}

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
  if (j.contains("decoder") && !j["decoder"].is_null()) {
    parse_decoder(j["decoder"], origin + ": decoder", *pipe, info);
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
  const std::vector<std::pair<std::string, int>> added_content = read_added_tokens(j, origin, *pipe);
  tok.fill_ids(entries, added_content, *pipe, origin, mwhere);
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

namespace {

// Splits `text` at the added tokens of `set` as Hugging Face's AddedVocabulary
// does: leftmost match first, the longest at a position, never overlapping
// (Aho-Corasick, LeftmostLongest). A single_word token that touches a word
// character on either side is skipped; lstrip / rstrip tokens absorb the
// whitespace beside them. Calls on_text(b, e) for the stretches between tokens
// (also empty ones) and on_token(id) for each token, in order.
template <class OnText, class OnToken>
void split_added(const std::string& text, const std::vector<Tokenizer::Pipeline::Added>& set, OnText on_text,
                 OnToken on_token) {
  std::size_t pos = 0, section = 0;
  while (pos < text.size() && !set.empty()) {
    const Tokenizer::Pipeline::Added* hit = nullptr;
    std::size_t at = std::string::npos;
    for (const auto& a : set) {
      const std::size_t f = text.find(a.content, pos);
      if (f < at) {
        at = f;
        hit = &a;
      }
    }
    if (!hit) break;
    std::size_t before = at, end = at + hit->content.size();
    pos = end;
    if (hit->single_word && ((at > 0 && is_word_char(char_at(text, prev_char_start(text, at)))) ||
                             (end < text.size() && is_word_char(char_at(text, end))))) {
      continue;
    }
    if (hit->lstrip) {
      while (before > section && is_white_space(char_at(text, prev_char_start(text, before)))) {
        before = prev_char_start(text, before);
      }
    }
    if (hit->rstrip) {
      while (end < text.size() && is_white_space(char_at(text, end))) end += char_len(text, end);
    }
    on_text(section, before);
    on_token(hit->id);
    pos = section = end;
  }
  on_text(section, text.size());
}

}  // namespace

std::vector<int> Tokenizer::encode_pipeline(const std::string& raw) const {
  const Pipeline& p = *pipeline_;
  const std::string text = to_valid_utf8(raw);
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  auto push = [&](int id) { ids.push_back(id); };
  split_added(
      text, p.added,
      [&](std::size_t b, std::size_t e) {
        if (e <= b) return;
        std::string s = text.substr(b, e - b);
        if (p.normalizer) s = p.normalizer(s);
        split_added(
            s, p.normalized,
            [&](std::size_t nb, std::size_t ne) {
              if (ne <= nb) return;
              // at_start: the piece begins the whole input (Metaspace's prepend_scheme "first").
              std::vector<Piece> pieces{{s.substr(nb, ne - nb), b == 0 && nb == 0}};
              if (p.pre) p.pre(pieces);
              for (const Piece& piece : pieces) encode_piece(piece.text, ids);
            },
            push);
      },
      push);
  return ids;
}

std::string Tokenizer::decode_text(const std::vector<int>& ids) const {
  std::string s = decode(ids);
  if (!pipeline_ || ids.empty()) return s;
  const Pipeline& p = *pipeline_;
  if (p.metaspace_first && !token_bytes(ids[0]).empty() && token_bytes(ids[0])[0] == ' ' && !s.empty()) {
    s.erase(0, 1);
  }
  const std::string& c = p.strip_char;
  for (int k = 0; k < p.strip_start && s.compare(0, c.size(), c) == 0; ++k) s.erase(0, c.size());
  for (int k = 0; k < p.strip_stop && s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0; ++k) {
    s.resize(s.size() - c.size());
  }
  return s;
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
