// The values a chat template computes with, as Jinja2 (Python) has them:
// undefined, None, bool, int, float, str, list/tuple, dict, namespace and
// callables. Lists and dicts are shared by reference, as Python's are, so a
// namespace set inside a loop is seen after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/core/error.h"

namespace kvscope::jinja {

struct Value;
using List = std::vector<Value>;
// Insertion-ordered, as Python's dict; keys are strings (JSON's and the
// templates' literals are).
using Dict = std::vector<std::pair<std::string, Value>>;
struct Args;
using Function = std::function<Value(Args&)>;

struct Value {
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kCallable
  };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;                 // kString; kUndefined: the name that was missing (for the error)
  std::shared_ptr<List> list;    // kList, kTuple
  std::shared_ptr<Dict> dict;    // kDict, kNamespace
  std::shared_ptr<Function> fn;  // kCallable

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List v = {});
  static Value tuple(List v);
  static Value make_dict(Dict v = {});
  static Value callable(Function f);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_sequence() const { return kind == Kind::kList || kind == Kind::kTuple; }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }

  // A dict's (or namespace's) value for `key`, null if absent.
  const Value* find(const std::string& key) const;
  // Sets or appends `key` (a dict or namespace).
  void set(const std::string& key, Value v);
};

// Call arguments: positional, then keyword (in order).
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional `i`, else keyword `name`, else `fallback`.
  Value get(size_t i, const char* name, Value fallback = Value::undefined()) const;
  // What the call is, for errors ("filter 'trim'").
  std::string what;
};

// A template that failed as Jinja2 would raise: an undefined value used,
// a type error, raise_exception(...). Its message says what.
class RenderError : public Error {
 public:
  explicit RenderError(const std::string& what) : Error(what) {}
};
// A construct this interpreter does not implement (a filter, a method, a
// statement). Never rendered approximately: the caller refuses the template.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& what) : Error(what) {}
};

// Python truthiness: empty, zero, None and undefined are false.
bool truthy(const Value& v);
// Python's str(v) (undefined: ""), as `{{ v }}` prints it.
std::string str(const Value& v);
// Python's repr(v) (strings quoted), as str() of a list shows its items.
std::string repr(const Value& v);
// Python's ==, with 1 == 1.0 == True.
bool equal(const Value& a, const Value& b);
// The type's name as Python says it, for errors: "str", "int", "NoneType", ...
std::string type_name(const Value& v);
// Number of characters (Unicode code points) of UTF-8 text.
int64_t char_count(const std::string& s);
// The characters of UTF-8 text, one string each (invalid bytes stay single).
std::vector<std::string> chars_of(const std::string& s);

// JSON data (messages, tools) as values, and back.
Value from_json(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii=False, indent=indent): Python's separators
// (", " and ": " inline; "," then newlines with an indent), keys in order.
// indent < 0: inline.
std::string to_json_text(const Value& v, int indent);

}  // namespace kvscope::jinja
