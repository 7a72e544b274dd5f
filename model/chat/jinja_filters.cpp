// Jinja2's filters and tests that chat templates use (jinja_builtins.h),
// with transformers' tojson (json.dumps, non-ASCII kept, keys in order).
// Any other name is Unsupported.
#include <algorithm>
#include <cmath>
#include <map>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_text.h"

namespace kvscope::jinja {

namespace {

using FilterFn = Value (*)(Args&);
using TestFn = bool (*)(Args&);

Value arg0(Args& a) {
  return a.pos.empty() ? Value::undefined() : a.pos[0];
}

int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return char_count(v.s);
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict->size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      throw RenderError("object of type '" + type_name(v) + "' has no len()");
  }
}

// The attribute path "a.b" or index of a filter's attribute= argument.
Value attribute_of(const Value& item, const Value& attr) {
  if (attr.kind == Value::Kind::kInt) return get_item(item, attr);
  Value v = item;
  const std::string path = str(attr);
  size_t from = 0;
  for (size_t dot; from <= path.size(); from = dot + 1) {
    dot = path.find('.', from);
    if (dot == std::string::npos) dot = path.size();
    v = get_item(v, Value::string(path.substr(from, dot - from)));
    if (v.is_undefined()) return v;
  }
  return v;
}

Value f_trim(Args& a) {
  return Value::string(py_strip(str(arg0(a)), a.get(1, "chars"), true, true));
}
Value f_upper(Args& a) {
  return Value::string(py_upper(str(arg0(a))));
}
Value f_lower(Args& a) {
  return Value::string(py_lower(str(arg0(a))));
}
Value f_capitalize(Args& a) {
  return Value::string(py_title(str(arg0(a)), true));
}
Value f_title(Args& a) {
  return Value::string(py_title(str(arg0(a)), false));
}
Value f_length(Args& a) {
  return Value::integer(length_of(arg0(a)));
}
Value f_string(Args& a) {
  return Value::string(str(arg0(a)));
}
Value f_safe(Args& a) {
  return arg0(a);
}
Value f_tojson(Args& a) {
  const Value indent = a.get(1, "indent", Value::none());
  return Value::string(to_json_text(arg0(a), indent.kind == Value::Kind::kInt ? static_cast<int>(indent.i) : -1));
}
Value f_first(Args& a) {
  const List items = iterate(arg0(a));
  return items.empty() ? Value::undefined("first item of an empty sequence") : items.front();
}
Value f_last(Args& a) {
  const Value v = arg0(a);
  if (!v.is_sequence() && !v.is_string()) throw RenderError("'" + type_name(v) + "' object is not reversible");
  const List items = iterate(v);
  return items.empty() ? Value::undefined("last item of an empty sequence") : items.back();
}
Value f_list(Args& a) {
  return Value::make_list(iterate(arg0(a)));
}
Value f_reverse(Args& a) {
  const Value v = arg0(a);
  if (v.is_string()) {
    auto cs = chars_of(v.s);
    std::reverse(cs.begin(), cs.end());
    std::string out;
    for (const auto& c : cs) out += c;
    return Value::string(out);
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::make_list(items);
}
Value f_join(Args& a) {
  const std::string sep = str(a.get(1, "d", Value::string("")));
  const Value attr = a.get(2, "attribute", Value::none());
  std::string out;
  const List items = iterate(arg0(a));
  for (size_t k = 0; k < items.size(); ++k) {
    out += (k ? sep : "") + str(attr.is_none() ? items[k] : attribute_of(items[k], attr));
  }
  return Value::string(out);
}
Value f_default(Args& a) {
  const Value v = arg0(a);
  const bool boolean = truthy(a.get(2, "boolean", Value::boolean(false)));
  if (v.is_undefined() || (boolean && !truthy(v))) return a.get(1, "default_value", Value::string(""));
  return v;
}
Value f_items(Args& a) {
  const Value v = arg0(a);
  if (v.is_undefined()) return Value::make_list();
  if (v.kind != Value::Kind::kDict) throw RenderError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : *v.dict) out.push_back(Value::tuple({Value::string(k), x}));
  return Value::make_list(out);
}
Value f_replace(Args& a) {
  Args call;
  call.pos = {a.get(1, "old"), a.get(2, "new"), a.get(3, "count", Value::integer(-1))};
  return str_method(str(arg0(a)), "replace", call);
}
Value f_int(Args& a) {
  const Value v = arg0(a);
  if (v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool)
    return Value::integer(v.kind == Value::Kind::kInt ? v.i : v.b);
  if (v.kind == Value::Kind::kFloat && std::isfinite(v.f) && std::fabs(v.f) < 9e18) {
    return Value::integer(static_cast<int64_t>(v.f));
  }
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string t = py_strip(v.s, Value::undefined(), true, true);
      const long long n = std::stoll(t, &used, 10);
      if (used == t.size()) return Value::integer(n);
    } catch (const std::exception&) {
    }
  }
  return a.get(1, "default", Value::integer(0));
}
Value f_abs(Args& a) {
  const Value v = arg0(a);
  if (v.kind == Value::Kind::kFloat) return Value::number(std::fabs(v.f));
  if (v.kind == Value::Kind::kInt) return v.i < 0 ? negate(v) : v;
  throw RenderError("bad operand type for abs(): '" + type_name(v) + "'");
}
Value f_indent(Args& a) {
  const Value w = a.get(1, "width", Value::integer(4));
  const std::string pad = w.is_string() ? w.s : std::string(static_cast<size_t>(std::max<int64_t>(0, w.i)), ' ');
  const bool first = truthy(a.get(2, "first", Value::boolean(false)));
  const bool blank = truthy(a.get(3, "blank", Value::boolean(false)));
  const std::string s = str(arg0(a));
  std::string out;
  size_t from = 0;
  for (bool is_first = true; from <= s.size(); is_first = false) {
    size_t nl = s.find('\n', from);
    const std::string line = s.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
    if (!is_first && (blank || !line.empty())) out += pad;
    if (is_first && first) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    from = nl + 1;
  }
  return Value::string(out);
}

// select/reject/selectattr/rejectattr: keep items whose test (default: truthy) holds.
Value select_items(Args& a, bool by_attr, bool keep) {
  const size_t test_at = by_attr ? 2 : 1;
  List out;
  for (const Value& item : iterate(arg0(a))) {
    const Value subject = by_attr ? attribute_of(item, a.get(1, "attribute")) : item;
    bool ok;
    if (a.pos.size() > test_at) {
      Args t;
      t.pos.push_back(subject);
      t.pos.insert(t.pos.end(), a.pos.begin() + static_cast<long>(test_at) + 1, a.pos.end());
      ok = apply_test(str(a.pos[test_at]), t);
    } else {
      ok = truthy(subject);
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::make_list(out);
}
Value f_select(Args& a) {
  return select_items(a, false, true);
}
Value f_reject(Args& a) {
  return select_items(a, false, false);
}
Value f_selectattr(Args& a) {
  return select_items(a, true, true);
}
Value f_rejectattr(Args& a) {
  return select_items(a, true, false);
}
Value f_map(Args& a) {
  List out;
  const Value attr = a.get(99, "attribute");
  for (const Value& item : iterate(arg0(a))) {
    if (!attr.is_undefined()) {
      const Value v = attribute_of(item, attr);
      out.push_back(v.is_undefined() ? a.get(99, "default") : v);
      continue;
    }
    if (a.pos.size() < 2) throw Unsupported("map() without a filter name or attribute=");
    Args f;
    f.pos.push_back(item);
    f.pos.insert(f.pos.end(), a.pos.begin() + 2, a.pos.end());
    out.push_back(apply_filter(str(a.pos[1]), f));
  }
  return Value::make_list(out);
}
Value f_unique(Args& a) {
  List out;
  for (const Value& item : iterate(arg0(a))) {
    if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, item); })) out.push_back(item);
  }
  return Value::make_list(out);
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"trim", f_trim},
      {"upper", f_upper},
      {"lower", f_lower},
      {"capitalize", f_capitalize},
      {"title", f_title},
      {"length", f_length},
      {"count", f_length},
      {"string", f_string},
      {"safe", f_safe},
      {"tojson", f_tojson},
      {"first", f_first},
      {"last", f_last},
      {"list", f_list},
      {"reverse", f_reverse},
      {"join", f_join},
      {"default", f_default},
      {"d", f_default},
      {"items", f_items},
      {"replace", f_replace},
      {"int", f_int},
      {"abs", f_abs},
      {"indent", f_indent},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"map", f_map},
      {"unique", f_unique},
  };
  return table;
}

bool is_int(const Value& v) {
  return v.kind == Value::Kind::kInt;
}
Value arg1(Args& a) {
  return a.pos.size() > 1 ? a.pos[1] : Value::undefined();
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = {
      {"defined", [](Args& a) { return !arg0(a).is_undefined(); }},
      {"undefined", [](Args& a) { return arg0(a).is_undefined(); }},
      {"none", [](Args& a) { return arg0(a).is_none(); }},
      {"boolean", [](Args& a) { return arg0(a).kind == Value::Kind::kBool; }},
      {"true", [](Args& a) { return arg0(a).kind == Value::Kind::kBool && arg0(a).b; }},
      {"false", [](Args& a) { return arg0(a).kind == Value::Kind::kBool && !arg0(a).b; }},
      {"integer", [](Args& a) { return is_int(arg0(a)); }},
      {"float", [](Args& a) { return arg0(a).kind == Value::Kind::kFloat; }},
      {"number", [](Args& a) { return arg0(a).is_number(); }},
      {"string", [](Args& a) { return arg0(a).is_string(); }},
      {"mapping", [](Args& a) { return arg0(a).kind == Value::Kind::kDict; }},
      {"iterable",
       [](Args& a) {
         const Value v = arg0(a);
         return v.is_string() || v.is_sequence() || v.kind == Value::Kind::kDict || v.is_undefined();
       }},
      {"sequence",
       [](Args& a) {
         const Value v = arg0(a);
         return v.is_string() || v.is_sequence() || v.kind == Value::Kind::kDict || v.is_undefined();
       }},
      {"callable", [](Args& a) { return arg0(a).kind == Value::Kind::kCallable; }},
      {"odd", [](Args& a) { return is_int(arg0(a)) && (arg0(a).i % 2 != 0); }},
      {"even", [](Args& a) { return is_int(arg0(a)) && arg0(a).i % 2 == 0; }},
      {"divisibleby",
       [](Args& a) { return is_int(arg0(a)) && is_int(arg1(a)) && arg1(a).i != 0 && arg0(a).i % arg1(a).i == 0; }},
      {"eq", [](Args& a) { return equal(arg0(a), arg1(a)); }},
      {"equalto", [](Args& a) { return equal(arg0(a), arg1(a)); }},
      {"==", [](Args& a) { return equal(arg0(a), arg1(a)); }},
      {"ne", [](Args& a) { return !equal(arg0(a), arg1(a)); }},
      {"!=", [](Args& a) { return !equal(arg0(a), arg1(a)); }},
      {"in", [](Args& a) { return truthy(binary_op("in", arg0(a), arg1(a))); }},
      {"gt", [](Args& a) { return truthy(binary_op(">", arg0(a), arg1(a))); }},
      {"ge", [](Args& a) { return truthy(binary_op(">=", arg0(a), arg1(a))); }},
      {"lt", [](Args& a) { return truthy(binary_op("<", arg0(a), arg1(a))); }},
      {"le", [](Args& a) { return truthy(binary_op("<=", arg0(a), arg1(a))); }},
      {"lower", [](Args& a) { return arg0(a).is_string() && py_lower(arg0(a).s) == arg0(a).s; }},
      {"upper", [](Args& a) { return arg0(a).is_string() && py_upper(arg0(a).s) == arg0(a).s; }},
  };
  return table;
}

}  // namespace

Value apply_filter(const std::string& name, Args& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw Unsupported("the filter '" + name + "'");
  return it->second(args);
}

bool apply_test(const std::string& name, Args& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) throw Unsupported("the test '" + name + "'");
  return it->second(args);
}

}  // namespace kvscope::jinja
