// tokenizer.json's normalizers and pre-tokenizers (see tokenizer_rules.h).
// Split regexes run on PCRE2 in UTF + UCP mode (\p{L}, \p{N}, (?i:...),
// lookahead), with \s spelled out as Unicode White_Space as the Rust
// library's Oniguruma has it (PCRE2's \s adds U+180E).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer/tokenizer_rules.h"

#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "model/core/error.h"
#include "model/core/json_quote.h"
#include "model/tokenizer/tokenizer.h"

namespace kvscope::detail {

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

std::string json_str(const json& j, const char* key, const std::string& where, const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw Error(where + ": field \"" + key + "\" must be a string, got " + json_quote(j[key]));
  return j[key].get<std::string>();
}

bool json_bool(const json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw Error(where + ": field \"" + key + "\" must be true or false, got " + json_quote(j[key]));
  return j[key].get<bool>();
}

std::string type_of(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected an object with a \"type\", got " + json_quote(j));
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
      throw Error(where + ": expected \"pattern\": {\"String\": ...} or {\"Regex\": ...}, got " + json_quote(j));
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

namespace {

// ByteLevel: GPT-2's optional leading space, then (use_regex) its pattern.
PreTokenizer byte_level_pre_tokenizer(const json& j, const std::string& where, PreTokenizerInfo& info) {
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

PreTokenizer split_pre_tokenizer(const json& j, const std::string& where) {
  if (json_bool(j, "invert", where, false)) throw Error(where + ": Split with \"invert\": true is not supported");
  const auto pat = std::make_shared<const Pattern>(Pattern::parse(j.value("pattern", json()), where + ".pattern"));
  const Behavior behavior = parse_behavior(j, where);
  return [pat, behavior](std::vector<Piece>& pieces) {
    split_pieces(pieces, behavior, [&](const std::string& s) { return pat->find_all(s); });
  };
}

PreTokenizer digits_pre_tokenizer(const json& j, const std::string& where) {
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

// Metaspace: spaces become the replacement (▁ by default), prepended per the
// scheme; split (the default) starts a piece at each replacement.
PreTokenizer metaspace_pre_tokenizer(const json& j, const std::string& where) {
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
    if (!split) return;
    split_pieces(pieces, Behavior::kMergedWithNext, [&](const std::string& s) {
      std::vector<std::pair<std::size_t, std::size_t>> m;
      for (std::size_t hit = s.find(rep); hit != std::string::npos; hit = s.find(rep, hit + rep.size())) {
        m.emplace_back(hit, hit + rep.size());
      }
      return m;
    });
  };
}

}  // namespace

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
  if (t == "ByteLevel") return byte_level_pre_tokenizer(j, where, info);
  if (t == "Split") return split_pre_tokenizer(j, where);
  if (t == "Digits") return digits_pre_tokenizer(j, where);
  if (t == "Metaspace") return metaspace_pre_tokenizer(j, where);
  throw Error(where + ": pre-tokenizer \"" + t +
              "\" is not supported (supported: Sequence, Split, ByteLevel, Digits, Metaspace)");
}

}  // namespace kvscope::detail
