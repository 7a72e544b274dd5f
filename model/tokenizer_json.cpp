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
// Split regexes run on PCRE2 in UTF + UCP mode (\p{L}, \p{N}, (?i:...),
// lookahead), with \s spelled out as Unicode White_Space as the Rust
// library's Oniguruma has it (PCRE2's \s adds U+180E).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include "error.h"
#include "tokenizer.h"
#include "tokenizer_detail.h"

namespace kvscope {
namespace {

using nlohmann::json;

// Unicode White_Space, as a character-class body for PCRE2.
constexpr const char* kWhiteSpaceClass =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Byte length of the UTF-8 character starting at s[i] (valid UTF-8 assumed).
std::size_t char_len(const std::string& s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return std::min(n, s.size() - i);
}

char32_t char_at(const std::string& s, std::size_t i) {
  utf8proc_int32_t cp = 0;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i, static_cast<utf8proc_ssize_t>(s.size() - i),
                   &cp);
  return static_cast<char32_t>(cp);
}

// Invalid UTF-8 bytes become U+FFFD: tokenizer.json models take Unicode text.
std::string to_valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    utf8proc_int32_t cp = -1;
    const utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0 || cp < 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text, i, static_cast<std::size_t>(n));
      i += static_cast<std::size_t>(n);
    }
  }
  return out;
}

// A compiled PCRE2 pattern (shared, immutable; match data is per call).
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where) {
    const std::string translated = translate(pattern, where);
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                          &err, &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error(where + ": regex " + json(pattern).dump() + " does not compile (" +
                  reinterpret_cast<const char*>(msg) + " at offset " + std::to_string(offset) + ")");
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-empty matches [begin, end) of the whole of `s`, left to right.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(const std::string& s) const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    std::size_t off = 0;
    while (off < s.size()) {
      const int rc =
          pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), off, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;  // no match (or a resource limit: the rest stays one piece)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0]) {  // empty match: try again one character on
        off = ov[0] + (ov[0] < s.size() ? char_len(s, ov[0]) : 1);
        continue;
      }
      out.emplace_back(ov[0], ov[1]);
      off = ov[1];
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;

  // \s and \S -> explicit White_Space classes (see the file comment).
  static std::string translate(const std::string& p, const std::string& where) {
    std::string out;
    bool in_class = false;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const char c = p[i];
      if (c == '\\' && i + 1 < p.size()) {
        const char e = p[i + 1];
        ++i;
        if (e == 's') {
          out += in_class ? std::string(kWhiteSpaceClass) : "[" + std::string(kWhiteSpaceClass) + "]";
        } else if (e == 'S') {
          if (in_class) throw Error(where + ": regex: \\S inside a character class is not supported");
          out += "[^" + std::string(kWhiteSpaceClass) + "]";
        } else {
          out += c;
          out += e;
        }
        continue;
      }
      if (!in_class && c == '[') {
        in_class = true;
        out += c;
        if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
        if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a literal ] first in the class
        continue;
      }
      if (in_class && c == ']') in_class = false;
      out += c;
    }
    return out;
  }
};

std::string json_str(const json& j, const char* key, const std::string& where, const std::string& fallback = "") {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw Error(where + ": field \"" + key + "\" must be a string, got " + j[key].dump());
  return j[key].get<std::string>();
}

bool json_bool(const json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) throw Error(where + ": field \"" + key + "\" must be true or false, got " + j[key].dump());
  return j[key].get<bool>();
}

std::string type_of(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected an object with a \"type\", got " + j.dump());
  const std::string t = json_str(j, "type", where);
  if (t.empty()) throw Error(where + ": missing \"type\"");
  return t;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// A Split/Replace pattern: {"String": literal} or {"Regex": pattern}.
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;

  static Pattern parse(const json& j, const std::string& where) {
    Pattern p;
    if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
      p.regex = std::make_shared<const Regex>(j["Regex"].get<std::string>(), where);
    } else if (j.is_object() && j.contains("String") && j["String"].is_string()) {
      p.literal = j["String"].get<std::string>();
      if (p.literal.empty()) throw Error(where + ": empty \"String\" pattern");
    } else {
      throw Error(where + ": expected \"pattern\": {\"String\": ...} or {\"Regex\": ...}, got " + j.dump());
    }
    return p;
  }
  std::vector<std::pair<std::size_t, std::size_t>> find_all(const std::string& s) const {
    if (regex) return regex->find_all(s);
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t hit = s.find(literal); hit != std::string::npos; hit = s.find(literal, hit + literal.size())) {
      out.emplace_back(hit, hit + literal.size());
    }
    return out;
  }
};

// ---- normalizers ---------------------------------------------------------------
using Normalizer = std::function<std::string(const std::string&)>;

std::string utf8proc_apply(const std::string& s, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) return s;  // cannot happen on valid UTF-8
  std::string r(reinterpret_cast<char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return r;
}

Normalizer parse_normalizer(const json& j, const std::string& where) {
  const std::string t = type_of(j, where);
  if (t == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      throw Error(where + ": expected \"normalizers\": [...]");
    std::vector<Normalizer> steps;
    for (std::size_t i = 0; i < j["normalizers"].size(); ++i) {
      steps.push_back(parse_normalizer(j["normalizers"][i], where + ".normalizers[" + std::to_string(i) + "]"));
    }
    return [steps](const std::string& s) {
      std::string r = s;
      for (const Normalizer& n : steps) r = n(r);
      return r;
    };
  }
  if (t == "NFC") return [](const std::string& s) { return utf8proc_apply(s, UTF8PROC_COMPOSE); };
  if (t == "NFD") return [](const std::string& s) { return utf8proc_apply(s, UTF8PROC_DECOMPOSE); };
  if (t == "NFKC") return [](const std::string& s) { return utf8proc_apply(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); };
  if (t == "NFKD") return [](const std::string& s) { return utf8proc_apply(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); };
  if (t == "Lowercase") {
    return [](const std::string& s) {
      std::string r;
      for (std::size_t i = 0; i < s.size(); i += char_len(s, i)) {
        utf8proc_uint8_t buf[4];
        const utf8proc_ssize_t n =
            utf8proc_encode_char(utf8proc_tolower(static_cast<utf8proc_int32_t>(char_at(s, i))), buf);
        r.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
      }
      return r;
    };
  }
  if (t == "Prepend") {
    const std::string pre = json_str(j, "prepend", where);
    return [pre](const std::string& s) { return s.empty() ? s : pre + s; };
  }
  if (t == "Replace") {
    const Pattern pat = Pattern::parse(j.value("pattern", json()), where + ".pattern");
    const std::string content = json_str(j, "content", where);
    return [pat, content](const std::string& s) {
      if (!pat.regex) return replace_all(s, pat.literal, content);
      std::string r;
      std::size_t pos = 0;
      for (const auto& [b, e] : pat.find_all(s)) {
        r.append(s, pos, b - pos);
        r += content;
        pos = e;
      }
      return r.append(s, pos, std::string::npos);
    };
  }
  if (t == "Strip") {
    const bool left = json_bool(j, "strip_left", where, true), right = json_bool(j, "strip_right", where, true);
    return [left, right](const std::string& s) {
      std::size_t b = 0, e = s.size();
      while (left && b < e && is_white_space(char_at(s, b))) b += char_len(s, b);
      while (right && e > b) {
        std::size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        if (!is_white_space(char_at(s, k))) break;
        e = k;
      }
      return s.substr(b, e - b);
    };
  }
  throw Error(where + ": normalizer \"" + t +
              "\" is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip)");
}

// ---- pre-tokenizers --------------------------------------------------------------
// A piece of text and whether it starts the whole input (Metaspace's "first").
struct Piece {
  std::string text;
  bool at_start;
};
using PreTokenizer = std::function<void(std::vector<Piece>&)>;

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits every piece at the matches of `find`, as `tokenizers`' split() with `behavior`.
void split_pieces(std::vector<Piece>& pieces, Behavior behavior,
                  const std::function<std::vector<std::pair<std::size_t, std::size_t>>(const std::string&)>& find) {
  std::vector<Piece> out;
  for (const Piece& p : pieces) {
    const std::string& s = p.text;
    std::vector<std::pair<std::size_t, std::size_t>> m = find(s);
    if (behavior == Behavior::kContiguous) {  // adjacent matches form one
      std::vector<std::pair<std::size_t, std::size_t>> merged;
      for (const auto& r : m) {
        if (!merged.empty() && merged.back().second == r.first) {
          merged.back().second = r.second;
        } else {
          merged.push_back(r);
        }
      }
      m.swap(merged);
    }
    // Cut points: [gap][match][gap][match]...; which ones make pieces depends on the behaviour.
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    std::size_t pos = 0;
    for (const auto& [b, e] : m) {
      switch (behavior) {
        case Behavior::kIsolated:
        case Behavior::kContiguous:
          spans.emplace_back(pos, b);
          spans.emplace_back(b, e);
          pos = e;
          break;
        case Behavior::kRemoved:
          spans.emplace_back(pos, b);
          pos = e;
          break;
        case Behavior::kMergedWithPrevious:
          spans.emplace_back(pos, e);
          pos = e;
          break;
        case Behavior::kMergedWithNext:
          spans.emplace_back(pos, b);
          pos = b;
          break;
      }
    }
    spans.emplace_back(pos, s.size());
    for (const auto& [b, e] : spans) {
      if (e > b) out.push_back({s.substr(b, e - b), p.at_start && b == 0});
    }
  }
  pieces.swap(out);
}

Behavior parse_behavior(const json& j, const std::string& where) {
  const std::string b = json_str(j, "behavior", where, "Isolated");
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  throw Error(where + ": behavior \"" + b +
              "\" is not supported (expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous)");
}

struct PreTokenizerInfo {
  bool byte_level = false;  // a ByteLevel step: entries are GPT-2's unicode form of bytes
};

PreTokenizer parse_pre_tokenizer(const json& j, const std::string& where, PreTokenizerInfo& info) {
  const std::string t = type_of(j, where);
  if (t == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      throw Error(where + ": expected \"pretokenizers\": [...]");
    }
    std::vector<PreTokenizer> steps;
    for (std::size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      steps.push_back(
          parse_pre_tokenizer(j["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]", info));
    }
    return [steps](std::vector<Piece>& pieces) {
      for (const PreTokenizer& s : steps) s(pieces);
    };
  }
  if (t == "ByteLevel") {
    info.byte_level = true;
    const bool prefix = json_bool(j, "add_prefix_space", where, true);
    const bool use_regex = json_bool(j, "use_regex", where, true);
    return [prefix, use_regex](std::vector<Piece>& pieces) {
      if (prefix) {
        for (Piece& p : pieces) {
          if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
        }
      }
      if (!use_regex) return;
      // GPT-2's pattern: the hand-written splitter the GPT-2 files use too.
      std::vector<Piece> out;
      for (const Piece& p : pieces) {
        bool first = p.at_start;
        for (std::string& s : pretokenize(p.text)) {
          out.push_back({std::move(s), first});
          first = false;
        }
      }
      pieces.swap(out);
    };
  }
  if (t == "Split") {
    if (json_bool(j, "invert", where, false)) throw Error(where + ": Split with \"invert\": true is not supported");
    const auto pat = std::make_shared<const Pattern>(Pattern::parse(j.value("pattern", json()), where + ".pattern"));
    const Behavior behavior = parse_behavior(j, where);
    return [pat, behavior](std::vector<Piece>& pieces) {
      split_pieces(pieces, behavior, [&](const std::string& s) { return pat->find_all(s); });
    };
  }
  if (t == "Digits") {
    const bool individual = json_bool(j, "individual_digits", where, false);
    // ASCII digits, as Rust's char::is_ascii_digit.
    return [individual](std::vector<Piece>& pieces) {
      split_pieces(pieces, individual ? Behavior::kIsolated : Behavior::kContiguous, [](const std::string& s) {
        std::vector<std::pair<std::size_t, std::size_t>> m;
        for (std::size_t i = 0; i < s.size(); ++i) {
          if (s[i] >= '0' && s[i] <= '9') m.emplace_back(i, i + 1);
        }
        return m;
      });
    };
  }
  if (t == "Metaspace") {
    const std::string rep = json_str(j, "replacement", where, "\xE2\x96\x81");
    std::string scheme = json_str(j, "prepend_scheme", where, "");
    if (scheme.empty()) scheme = json_bool(j, "add_prefix_space", where, true) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      throw Error(where + ": prepend_scheme \"" + scheme + "\" is not supported (expected always, first or never)");
    }
    const bool split = json_bool(j, "split", where, true);
    return [rep, scheme, split](std::vector<Piece>& pieces) {
      for (Piece& p : pieces) {
        p.text = replace_all(p.text, " ", rep);
        const bool prepend = scheme == "always" || (scheme == "first" && p.at_start);
        if (prepend && p.text.compare(0, rep.size(), rep) != 0) p.text.insert(0, rep);
      }
      if (split) {
        split_pieces(pieces, Behavior::kMergedWithNext, [&](const std::string& s) {
          std::vector<std::pair<std::size_t, std::size_t>> m;
          for (std::size_t hit = s.find(rep); hit != std::string::npos; hit = s.find(rep, hit + rep.size())) {
            m.emplace_back(hit, hit + rep.size());
          }
          return m;
        });
      }
    };
  }
  throw Error(where + ": pre-tokenizer \"" + t +
              "\" is not supported (supported: Sequence, Split, ByteLevel, Digits, Metaspace)");
}

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

Tokenizer Tokenizer::from_tokenizer_json(const std::string& json_text, const std::string& origin) {
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
