// Operators, attribute and item access, filters, tests and methods, as
// Python and Jinja2 define them for the values of jinja_value.h.
#pragma once

#include <string>

#include "model/chat/jinja_value.h"

namespace kvscope::jinja {

// a OP b for + - * / // % ** ~ == != < > <= >= in notin.
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
// obj.name: a method bound to obj (str, dict), a dict's item, a
// namespace's attribute; undefined when absent.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: a sequence's or string's index (negative from the end), a
// dict's key; undefined when absent.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's rules (undefined or None: omitted).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// value | name(args...): args.pos[0] is the value.
Value apply_filter(const std::string& name, Args& args);
// value is name(args...): args.pos[0] is the value.
bool apply_test(const std::string& name, Args& args);
// The items a for loop walks: a list's or tuple's items, a dict's keys, a
// string's characters; undefined: none.
List iterate(const Value& v);
// Raised where Jinja2's Undefined refuses: "'name' is undefined".
[[noreturn]] void undefined_error(const Value& v);

}  // namespace kvscope::jinja
