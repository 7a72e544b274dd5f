// Template text -> tokens, as Jinja2 3.1's lexer splits it with the chat
// environment's options: trim_blocks (a block or comment tag eats the one
// newline after it), lstrip_blocks (spaces and tabs before a block or
// comment tag at the start of a line go), "-" beside a tag strips all
// whitespace on that side, "+" keeps it, one trailing newline of the
// template is dropped (keep_trailing_newline off) and \r\n reads as \n.
#include "model/chat/jinja_lex.h"

#include <utf8proc.h>

#include <cctype>
#include <cstring>

namespace kvscope::jinja {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Appends the UTF-8 form of code point `cp` (a \x, \u or octal escape).
void put_utf8(uint32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(normalize_newlines(src)) {}
  std::vector<Token> run();

 private:
  std::string s_;
  size_t p_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  bool strip_next_ = false;  // the previous tag ended with "-"
  std::vector<Token> out_;

  [[noreturn]] void fail(const std::string& what) const {
    throw Unsupported("line " + std::to_string(line_) + ": " + what);
  }
  void text_until(size_t tag, char kind);
  void tag_end(size_t after, bool strip, bool keep);
  void comment(size_t open);
  void expression(bool block);
  bool end_at(bool block);
  void string_token();
  void number_token();
  void count_lines(size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) line_ += s_[k] == '\n';
  }
};

std::vector<Token> Lexer::run() {
  while (p_ < s_.size()) {
    size_t tag = p_;
    char kind = 0;
    while ((tag = s_.find('{', tag)) != std::string::npos) {
      if (tag + 1 < s_.size() && std::strchr("{%#", s_[tag + 1])) {
        kind = s_[tag + 1];
        break;
      }
      ++tag;
    }
    if (tag == std::string::npos) tag = s_.size();
    text_until(tag, kind);
    if (tag == s_.size()) break;
    const char sign = tag + 2 < s_.size() ? s_[tag + 2] : 0;
    p_ = tag + 2 + (sign == '-' || sign == '+');
    if (kind == '#') {
      comment(tag);
    } else {
      out_.push_back({kind == '%' ? Token::kBlockBegin : Token::kVarBegin, "", line_});
      expression(kind == '%');
    }
  }
  out_.push_back({Token::kEof, "", line_});
  return std::move(out_);
}

// The text from p_ to a tag at `tag` (of `kind`: '{', '%', '#', or 0 at the end).
void Lexer::text_until(size_t tag, char kind) {
  std::string text = s_.substr(p_, tag - p_);
  if (strip_next_) {
    size_t k = 0;
    while (k < text.size() && is_space(text[k])) ++k;
    text.erase(0, k);
  }
  const char sign = kind && tag + 2 < s_.size() ? s_[tag + 2] : 0;
  if (sign == '-') {
    size_t n = text.size();
    while (n > 0 && is_space(text[n - 1])) --n;
    text.resize(n);
  } else if (kind && kind != '{' && sign != '+') {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting_) {
      size_t k = l_pos;
      while (k < text.size() && is_space(text[k])) ++k;
      if (k == text.size()) text.resize(l_pos);
    }
  }
  count_lines(p_, tag);
  if (!text.empty()) out_.push_back({Token::kText, std::move(text), line_});
  strip_next_ = false;
  line_starting_ = false;
}

// After a tag's closing marker (ending at `after`): "-" strips the following
// whitespace; a block or comment tag (not `keep`: "+") eats one newline.
void Lexer::tag_end(size_t after, bool strip, bool trim) {
  p_ = after;
  if (strip) {
    strip_next_ = true;
    size_t k = p_;
    while (k < s_.size() && is_space(s_[k])) ++k;
    line_starting_ = k > p_ && s_[k - 1] == '\n';
  } else if (trim && p_ < s_.size() && s_[p_] == '\n') {
    ++p_;
    ++line_;
    line_starting_ = true;
  } else {
    line_starting_ = false;
  }
}

void Lexer::comment(size_t open) {
  const size_t close = s_.find("#}", p_);
  if (close == std::string::npos) fail("a comment opened here is never closed with #}");
  count_lines(open, close);
  const bool strip = close > p_ && s_[close - 1] == '-';
  const bool keep = close > p_ && s_[close - 1] == '+';
  tag_end(close + 2, strip, !keep);
}

// At a closing marker of a block ("%}", "-%}", "+%}") or a variable ("}}",
// "-}}"): emits it and moves past. Jinja checks these before operators, so
// "x-}}" ends the tag.
bool Lexer::end_at(bool block) {
  const char* close = block ? "%}" : "}}";
  const char sign = s_[p_];
  const size_t at = (sign == '-' || (block && sign == '+')) ? p_ + 1 : p_;
  if (s_.compare(at, 2, close) != 0) return false;
  out_.push_back({block ? Token::kBlockEnd : Token::kVarEnd, "", line_});
  tag_end(at + 2, sign == '-', block && sign != '+');
  return true;
}

void Lexer::expression(bool block) {
  static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                     "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
  int open = 0;  // brackets open: Jinja reads no closing marker inside them, so {'a': {}}} works
  for (;;) {
    while (p_ < s_.size() && is_space(s_[p_])) line_ += s_[p_++] == '\n';
    if (p_ >= s_.size()) fail(std::string("a tag is never closed with ") + (block ? "%}" : "}}"));
    if (open == 0 && end_at(block)) return;
    const char c = s_[p_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t b = p_;
      while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) ++p_;
      out_.push_back({Token::kName, s_.substr(b, p_ - b), line_});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      number_token();
    } else if (c == '\'' || c == '"') {
      string_token();
    } else {
      const char* op = nullptr;
      for (const char* o : kOps) {
        if (s_.compare(p_, std::strlen(o), o) == 0) {
          op = o;
          break;
        }
      }
      if (!op) fail(std::string("unexpected character '") + c + "'");
      if (std::strchr("([{", op[0])) ++open;
      if (std::strchr(")]}", op[0]) && open > 0) --open;
      out_.push_back({Token::kOp, op, line_});
      p_ += std::strlen(op);
    }
  }
}

void Lexer::number_token() {
  const size_t b = p_;
  auto digits = [&] {
    while (p_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) ++p_;
  };
  digits();
  bool is_float = false;
  if (p_ + 1 < s_.size() && s_[p_] == '.' && std::isdigit(static_cast<unsigned char>(s_[p_ + 1]))) {
    ++p_;
    digits();
    is_float = true;
  }
  if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
    size_t q = p_ + 1;
    if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
    if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
      p_ = q;
      digits();
      is_float = true;
    }
  }
  std::string text;
  for (size_t k = b; k < p_; ++k) {
    if (s_[k] != '_') text += s_[k];
  }
  out_.push_back({is_float ? Token::kFloat : Token::kInt, text, line_});
}

// A quoted literal, its escapes read as Python's "unicode-escape" codec
// does (unknown escapes keep their backslash).
void Lexer::string_token() {
  const char q = s_[p_++];
  std::string v;
  while (p_ < s_.size() && s_[p_] != q) {
    char c = s_[p_++];
    if (c == '\n') ++line_;
    if (c != '\\' || p_ >= s_.size()) {
      v += c;
      continue;
    }
    c = s_[p_++];
    const char* simple = c != '\0' ? std::strchr("nrtabfv\\'\"0", c) : nullptr;  // strchr finds a NUL too
    if (simple && c != '0') {
      static const char kTo[] = "\n\r\t\a\b\f\v\\'\"";
      v += kTo[simple - "nrtabfv\\'\"0"];
    } else if (c == 'x' || c == 'u' || c == 'U') {
      const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      // As Python's unicode-escape codec: exactly n hex digits, at most U+10FFFF.
      uint32_t cp = 0;
      for (size_t k = 0; k < n; ++k) {
        const char h = p_ + k < s_.size() ? s_[p_ + k] : '\0';
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          fail("a \\" + std::string(1, c) + " escape without its hex digits");
        cp = cp * 16 +
             static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      if (cp > 0x10FFFF) fail("a \\U escape beyond U+10FFFF");
      put_utf8(cp, v);
      p_ += n;
    } else if (c >= '0' && c <= '7') {
      uint32_t cp = static_cast<uint32_t>(c - '0');
      for (int k = 0; k < 2 && p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '7'; ++k) cp = cp * 8 + (s_[p_++] - '0');
      put_utf8(cp, v);
    } else if (c == '\n') {
      ++line_;  // a backslash-newline continues the literal
    } else if (c == 'N') {
      fail("\\N{...} escapes in string literals");
    } else {
      v += '\\';
      v += c;
    }
  }
  if (p_ >= s_.size()) fail("a string literal is never closed");
  ++p_;
  out_.push_back({Token::kString, v, line_});
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  return Lexer(source).run();
}

}  // namespace kvscope::jinja
