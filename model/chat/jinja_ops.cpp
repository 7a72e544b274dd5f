// Operators, attribute/item access and the str and dict methods templates
// call, with Python's semantics (jinja_builtins.h).
#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_text.h"

namespace kvscope::jinja {

void undefined_error(const Value& v) {
  if (!v.s.empty() && v.s[0] == '\'') throw RenderError(v.s);  // a whole message (a missing attribute)
  throw RenderError("'" + (v.s.empty() ? std::string("value") : v.s) + "' is undefined");
}

namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw RenderError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool is_intlike(const Value& v) {
  return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool;
}
int64_t int_of(const Value& v) {
  return v.kind == Value::Kind::kInt ? v.i : v.b;
}
double float_of(const Value& v) {
  return v.kind == Value::Kind::kFloat ? v.f : static_cast<double>(int_of(v));
}

// `overflow` is a __builtin_*_overflow result that has already written `r`.
Value checked(bool overflow, const int64_t& r) {
  if (overflow) throw Unsupported("integer arithmetic beyond 64 bits");
  return Value::integer(r);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) type_error(op, a, b);
  int64_t r = 0;
  if (is_intlike(a) && is_intlike(b) && op != "/") {
    const int64_t x = int_of(a), y = int_of(b);
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      return checked(overflow, r);
    }
    if (y == 0 && (op == "//" || op == "%")) throw RenderError("integer division or modulo by zero");
    if (op == "//") return Value::integer(x / y - ((x % y != 0) && ((x < 0) != (y < 0))));
    if (op == "%") return Value::integer(((x % y) + y) % y);
    if (op == "**" && y >= 0) {
      int64_t p = 1;
      for (int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(p, x, &p)) throw Unsupported("integer arithmetic beyond 64 bits");
      }
      return Value::integer(p);
    }
  }
  const double x = float_of(a), y = float_of(b);
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "**") return Value::number(std::pow(x, y));
  if (y == 0.0) throw RenderError("float division by zero");
  if (op == "/") return Value::number(x / y);
  if (op == "//") return Value::number(std::floor(x / y));
  return Value::number(x - y * std::floor(x / y));
}

Value repeat(const Value& seq, const Value& n) {
  const int64_t times = std::max<int64_t>(0, int_of(n));
  if (seq.is_string()) {
    if (static_cast<double>(seq.s.size()) * static_cast<double>(times) > 1e8) throw RenderError("string too long");
    std::string out;
    for (int64_t k = 0; k < times; ++k) out += seq.s;
    return Value::string(out);
  }
  if (static_cast<double>(seq.list->size()) * static_cast<double>(times) > 1e6) throw RenderError("list too long");
  List out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return seq.kind == Value::Kind::kTuple ? Value::tuple(out) : Value::make_list(out);
}

// Python's ordering for <, >, <=, >=: numbers, strings (code point order,
// which UTF-8 byte order keeps), sequences item by item.
int compare(const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = float_of(a), y = float_of(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.is_sequence() && b.kind == a.kind) {
    for (size_t k = 0; k < a.list->size() && k < b.list->size(); ++k) {
      if (!equal((*a.list)[k], (*b.list)[k])) return compare(op, (*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw RenderError("'" + op + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
                    "'");
}

bool contains(const Value& item, const Value& container) {
  switch (container.kind) {
    case Value::Kind::kString:
      if (!item.is_string()) type_error("in", item, container);
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return std::any_of(container.list->begin(), container.list->end(),
                         [&](const Value& v) { return equal(v, item); });
    case Value::Kind::kDict:
      return item.is_string() && container.find(item.s) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      throw RenderError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(str(a) + str(b));
  if (op == "==") return Value::boolean(equal(a, b));
  if (op == "!=") return Value::boolean(!equal(a, b));
  if (op == "in") return Value::boolean(contains(a, b));
  if (op == "notin") return Value::boolean(!contains(a, b));
  if (op == "<") return Value::boolean(compare(op, a, b) < 0);
  if (op == ">") return Value::boolean(compare(op, a, b) > 0);
  if (op == "<=") return Value::boolean(compare(op, a, b) <= 0);
  if (op == ">=") return Value::boolean(compare(op, a, b) >= 0);
  if (op == "+" && a.is_string() && b.is_string()) return Value::string(a.s + b.s);
  if (op == "+" && a.is_sequence() && b.kind == a.kind) {
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return a.kind == Value::Kind::kTuple ? Value::tuple(out) : Value::make_list(out);
  }
  if (op == "*" && (a.is_string() || a.is_sequence()) && is_intlike(b)) return repeat(a, b);
  if (op == "*" && (b.is_string() || b.is_sequence()) && is_intlike(a)) return repeat(b, a);
  if (op == "%" && a.is_string()) throw Unsupported("printf-style '%' formatting of strings");
  return arithmetic(op, a, b);
}

Value negate(const Value& v) {
  if (v.kind == Value::Kind::kFloat) return Value::number(-v.f);
  if (is_intlike(v)) return arithmetic("-", Value::integer(0), v);
  if (v.is_undefined()) undefined_error(v);
  throw RenderError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if ((obj.is_sequence() || obj.is_string()) && is_intlike(key)) {
    const std::vector<std::string> chars = obj.is_string() ? chars_of(obj.s) : std::vector<std::string>{};
    const int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.list->size());
    int64_t k = int_of(key);
    if (k < 0) k += n;
    if (k < 0 || k >= n) return Value::undefined(repr(obj) + "[" + str(key) + "]");
    return obj.is_string() ? Value::string(chars[static_cast<size_t>(k)]) : (*obj.list)[static_cast<size_t>(k)];
  }
  if (obj.kind == Value::Kind::kDict && key.is_string()) {
    if (const Value* v = obj.find(key.s)) return *v;
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::undefined(type_name(obj) + " object[" + repr(key) + "]");
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_error(obj);
  if (!obj.is_sequence() && !obj.is_string()) throw RenderError("'" + type_name(obj) + "' object is not subscriptable");
  auto part = [](const Value& v, int64_t fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!is_intlike(v)) throw RenderError("slice indices must be integers or None");
    return int_of(v);
  };
  const std::vector<std::string> chars = obj.is_string() ? chars_of(obj.s) : std::vector<std::string>{};
  const int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.list->size());
  const int64_t st = part(step, 1);
  if (st == 0) throw RenderError("slice step cannot be zero");
  auto clamp_index = [&](int64_t k) {
    if (k < 0) k += n;
    if (st > 0) return std::clamp<int64_t>(k, 0, n);
    return std::clamp<int64_t>(k, -1, n - 1);
  };
  const int64_t b = start.is_undefined() || start.is_none() ? (st > 0 ? 0 : n - 1) : clamp_index(part(start, 0));
  const int64_t e = stop.is_undefined() || stop.is_none() ? (st > 0 ? n : -1) : clamp_index(part(stop, 0));
  std::string s_out;
  List l_out;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.is_string()) {
      s_out += chars[static_cast<size_t>(k)];
    } else {
      l_out.push_back((*obj.list)[static_cast<size_t>(k)]);
    }
  }
  if (obj.is_string()) return Value::string(s_out);
  return obj.kind == Value::Kind::kTuple ? Value::tuple(l_out) : Value::make_list(l_out);
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return *v.list;
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      List out;
      for (auto& c : chars_of(v.s)) out.push_back(Value::string(c));
      return out;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      throw RenderError("'" + type_name(v) + "' object is not iterable");
  }
}

namespace {

Value dict_method(const Value& obj, const std::string& name, Args& a) {
  if (name == "get") {
    const Value key = a.get(0, "key");
    const Value* v = key.is_string() ? obj.find(key.s) : nullptr;
    return v ? *v : a.get(1, "default", Value::none());
  }
  List out;
  for (const auto& [k, v] : *obj.dict) {
    if (name == "items") out.push_back(Value::tuple({Value::string(k), v}));
    if (name == "keys") out.push_back(Value::string(k));
    if (name == "values") out.push_back(v);
  }
  return Value::make_list(out);
}

const std::set<std::string>& str_methods() {
  static const std::set<std::string> names = {"strip", "lstrip", "rstrip",  "split",      "startswith", "endswith",
                                              "upper", "lower",  "title",   "capitalize", "replace",    "find",
                                              "count", "join",   "isdigit", "isspace"};
  return names;
}

// Python methods that change their object: the immutable sandbox refuses them.
bool mutating(const std::string& name) {
  static const std::set<std::string> names = {"append", "extend",  "insert", "pop",        "remove", "clear",
                                              "sort",   "reverse", "update", "setdefault", "popitem"};
  return names.count(name) > 0;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_string() && str_methods().count(name)) {
    return Value::callable([obj, name](Args& a) { return str_method(obj.s, name, a); });
  }
  if (obj.kind == Value::Kind::kDict && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::callable([obj, name](Args& a) { return dict_method(obj, name, a); });
  }
  if (obj.is_mapping()) {
    if (const Value* v = obj.find(name)) return *v;
  }
  if ((obj.is_sequence() || obj.kind == Value::Kind::kDict) && mutating(name)) {
    return Value::callable([name](Args&) -> Value {
      throw RenderError("access to attribute '" + name + "' is unsafe: the sandbox keeps values immutable");
    });
  }
  if (obj.is_string() || obj.is_sequence() || obj.kind == Value::Kind::kDict) {
    Value u = Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
    u.b = true;  // calling it would be a Python method this interpreter lacks
    return u;
  }
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

}  // namespace kvscope::jinja
