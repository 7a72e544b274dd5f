// Values as Python prints and compares them (jinja_value.h).
#include "model/chat/jinja_value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvscope::jinja {

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.i = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(s);
  return v;
}
Value Value::make_list(List items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::tuple(List items) {
  Value v = make_list(std::move(items));
  v.kind = Kind::kTuple;
  return v;
}
Value Value::make_dict(Dict items) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::callable(Function f) {
  Value v;
  v.kind = Kind::kCallable;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, old] : *dict) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  dict->emplace_back(key, std::move(v));
}

Value Args::get(size_t idx, const char* name, Value fallback) const {
  if (idx < pos.size()) return pos[idx];
  for (const auto& [k, v] : kw) {
    if (k == name) return v;
  }
  return fallback;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.b;
    case Value::Kind::kInt:
      return v.i != 0;
    case Value::Kind::kFloat:
      return v.f != 0.0;
    case Value::Kind::kString:
      return !v.s.empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return !v.list->empty();
    case Value::Kind::kDict:
      return !v.dict->empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

namespace {

// Python's repr(float): the shortest digits that read back, fixed notation
// for exponents in [-4, 16), else d.ddde+XX.
std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // The shortest "%.Ne" that reads back as f (libc++ 14, the page's, has no
  // floating-point std::to_chars).
  char buf[64];
  for (int digits = 0; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string sci(buf);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
  }
  return neg ? "-" + out : out;
}

std::string hex_escape(unsigned c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

// Python's repr(str): single quotes unless the text has ' and no ".
std::string string_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += std::string("\\") + q;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += hex_escape(c);
    } else if (c == 0xc2 && k + 1 < s.size() && static_cast<unsigned char>(s[k + 1]) <= 0xa0) {
      out += hex_escape(static_cast<unsigned char>(s[++k]));  // U+0080..U+00A0 are not printable
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

std::string seq_repr(const Value& v) {
  const bool tuple = v.kind == Value::Kind::kTuple;
  std::string out = tuple ? "(" : "[";
  for (size_t k = 0; k < v.list->size(); ++k) {
    if (k) out += ", ";
    out += repr((*v.list)[k]);
  }
  if (tuple && v.list->size() == 1) out += ",";
  return out + (tuple ? ")" : "]");
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return string_repr(v.s);
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return seq_repr(v);
    case Value::Kind::kDict: {
      std::string out = "{";
      for (size_t k = 0; k < v.dict->size(); ++k) {
        if (k) out += ", ";
        out += string_repr((*v.dict)[k].first) + ": " + repr((*v.dict)[k].second);
      }
      return out + "}";
    }
    default:
      return str(v);
  }
}

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.b ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.i);
    case Value::Kind::kFloat:
      return float_repr(v.f);
    case Value::Kind::kString:
      return v.s;
    case Value::Kind::kNamespace:
      return "<Namespace " + repr(Value::make_dict(*v.dict)) + ">";
    case Value::Kind::kCallable:
      return "<function>";
    default:
      return repr(v);
  }
}

namespace {
double as_double(const Value& v) {
  return v.kind == Value::Kind::kFloat ? v.f : v.kind == Value::Kind::kInt ? static_cast<double>(v.i) : v.b ? 1.0 : 0.0;
}
int64_t as_int(const Value& v) {
  return v.kind == Value::Kind::kInt ? v.i : v.b ? 1 : 0;
}
}  // namespace

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::kFloat || b.kind == Value::Kind::kFloat) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.s == b.s;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = b.find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    default:
      return a.dict == b.dict && a.fn == b.fn;  // namespaces and callables: identity
  }
}

std::string type_name(const Value& v) {
  static const char* const names[] = {"Undefined", "NoneType", "bool", "int",       "float",   "str",
                                      "list",      "tuple",    "dict", "Namespace", "function"};
  return names[static_cast<int>(v.kind)];
}

int64_t char_count(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    size_t n = 1;
    while (k + n < s.size() && (static_cast<unsigned char>(s[k + n]) & 0xC0) == 0x80 && n < 4) ++n;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return Value::number(j.get<double>());
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict items;
      for (const auto& [k, e] : j.items()) items.emplace_back(k, from_json(e));
      return Value::make_dict(std::move(items));
    }
    default:
      return Value::none();  // binary and discarded values do not come from JSON text
  }
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void json_into(const Value& v, int indent, int level, std::string& out) {
  const std::string pad = indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ');
  const std::string end_pad = indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  const char* sep = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity") : float_repr(v.f);
      return;
    case Value::Kind::kString:
      out += json_string(v.s);
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += (k ? std::string(sep) : std::string()) + pad;
        json_into((*v.list)[k], indent, level + 1, out);
      }
      out += end_pad + "]";
      return;
    case Value::Kind::kDict:
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      out += "{";
      for (size_t k = 0; k < v.dict->size(); ++k) {
        out += (k ? std::string(sep) : std::string()) + pad + json_string((*v.dict)[k].first) + ": ";
        json_into((*v.dict)[k].second, indent, level + 1, out);
      }
      out += end_pad + "}";
      return;
    default:
      throw RenderError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json_text(const Value& v, int indent) {
  std::string out;
  json_into(v, indent, 0, out);
  return out;
}

}  // namespace kvscope::jinja
