// Python's str methods on UTF-8 text, as templates call them (strip with
// Python's whitespace, split, startswith, upper/lower by code point).
#include "model/chat/jinja_text.h"

#include "model/chat/jinja_builtins.h"

#include <utf8proc.h>

namespace kvscope::jinja {

namespace {

uint32_t code_point(const std::string& ch) {
  utf8proc_int32_t cp = -1;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
  return cp < 0 ? 0xFFFD : static_cast<uint32_t>(cp);
}

std::string from_code_point(uint32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// str.isspace()'s characters (Python's Unicode whitespace).
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string map_case(const std::string& s, int mode) {  // 0 lower, 1 upper
  std::string out;
  for (const auto& ch : chars_of(s)) {
    const uint32_t cp = code_point(ch);
    if (cp == 0xFFFD && ch != "\xEF\xBF\xBD") {
      out += ch;
      continue;
    }
    out += from_code_point(static_cast<uint32_t>(mode ? utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))
                                                      : utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

bool is_alpha(uint32_t cp) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

std::string need_string(const Value& v, const char* what) {
  if (!v.is_string()) {
    throw RenderError(std::string(what) + " must be str, not " + type_name(v));
  }
  return v.s;
}

Value split(const std::string& s, const Value& sep_v, const Value& max_v) {
  const int64_t max_split = max_v.kind == Value::Kind::kInt ? max_v.i : -1;
  List out;
  if (sep_v.is_undefined() || sep_v.is_none()) {
    const auto chars = chars_of(s);
    size_t k = 0;
    while (k < chars.size()) {
      while (k < chars.size() && py_space(code_point(chars[k]))) ++k;
      if (k == chars.size()) break;
      std::string word;
      if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) {
        size_t end = chars.size();
        while (end > k && py_space(code_point(chars[end - 1]))) --end;
        for (; k < end; ++k) word += chars[k];
      } else {
        while (k < chars.size() && !py_space(code_point(chars[k]))) word += chars[k++];
      }
      out.push_back(Value::string(word));
    }
    return Value::make_list(out);
  }
  const std::string sep = need_string(sep_v, "separator");
  if (sep.empty()) throw RenderError("empty separator");
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos;) {
    if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) break;
    out.push_back(Value::string(s.substr(from, at - from)));
    from = at + sep.size();
  }
  out.push_back(Value::string(s.substr(from)));
  return Value::make_list(out);
}

bool affix(const std::string& s, const Value& what, bool prefix) {
  List options = what.kind == Value::Kind::kTuple ? *what.list : List{what};
  for (const Value& o : options) {
    const std::string p = need_string(o, prefix ? "startswith argument" : "endswith argument");
    if (p.size() <= s.size() && s.compare(prefix ? 0 : s.size() - p.size(), p.size(), p) == 0) return true;
  }
  return false;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    const auto chars = chars_of(s);
    int64_t done = 0;
    for (size_t k = 0; k <= chars.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (k < chars.size()) out += chars[k];
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  for (size_t at; (count < 0 || done < count) && (at = s.find(from, pos)) != std::string::npos; ++done) {
    out += s.substr(pos, at - pos) + to;
    pos = at + from.size();
  }
  return out + s.substr(pos);
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto cs = chars_of(s);
  std::vector<std::string> set;
  const bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) set = chars_of(need_string(chars, "strip arg"));
  auto strip_it = [&](const std::string& ch) {
    if (whitespace) return py_space(code_point(ch));
    for (const auto& c : set) {
      if (c == ch) return true;
    }
    return false;
  };
  size_t b = 0, e = cs.size();
  while (left && b < e && strip_it(cs[b])) ++b;
  while (right && e > b && strip_it(cs[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cs[k];
  return out;
}

std::string py_lower(const std::string& s) {
  return map_case(s, 0);
}
std::string py_upper(const std::string& s) {
  return map_case(s, 1);
}

std::string py_title(const std::string& s, bool capitalize_only) {
  std::string out;
  bool prev_cased = false, first = true;
  for (const auto& ch : chars_of(s)) {
    const uint32_t cp = code_point(ch);
    const bool upper = capitalize_only ? first : !prev_cased;
    out += upper ? py_upper(ch) : py_lower(ch);
    prev_cased = is_alpha(cp);
    first = false;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name, Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(py_strip(s, a.get(0, "chars"), name[0] != 'r', name[0] != 'l'));
  }
  if (name == "split") return split(s, a.get(0, "sep"), a.get(1, "maxsplit"));
  if (name == "startswith" || name == "endswith") {
    return Value::boolean(affix(s, a.get(0, "prefix"), name[0] == 's'));
  }
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "title" || name == "capitalize") return Value::string(py_title(s, name == "capitalize"));
  if (name == "replace") {
    const Value n = a.get(2, "count", Value::integer(-1));
    return Value::string(replace(s, need_string(a.get(0, "old"), "replace() argument 1"),
                                 need_string(a.get(1, "new"), "replace() argument 2"), n.i));
  }
  if (name == "find" || name == "count") {
    const std::string sub = need_string(a.get(0, "sub"), "must be str");
    if (name == "find") {
      const size_t at = s.find(sub);
      return Value::integer(at == std::string::npos ? -1 : char_count(s.substr(0, at)));
    }
    if (sub.empty()) return Value::integer(char_count(s) + 1);
    int64_t n = 0;
    for (size_t at = 0; (at = s.find(sub, at)) != std::string::npos; at += sub.size()) ++n;
    return Value::integer(n);
  }
  if (name == "isdigit" || name == "isspace") {
    const auto cs = chars_of(s);
    bool all = !cs.empty();
    for (const auto& ch : cs) {
      const uint32_t cp = code_point(ch);
      all = all && (name == "isspace" ? py_space(cp) : (cp >= '0' && cp <= '9'));
    }
    return Value::boolean(all);
  }
  // join
  std::string out;
  const List items = iterate(a.get(0, "iterable"));
  for (size_t k = 0; k < items.size(); ++k) {
    if (!items[k].is_string()) {
      throw RenderError("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) +
                        " found");
    }
    out += (k ? s : "") + items[k].s;
  }
  return Value::string(out);
}

}  // namespace kvscope::jinja
