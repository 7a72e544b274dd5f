// Python's str methods on UTF-8 text (jinja_text.cpp).
#pragma once

#include <string>

#include "model/chat/jinja_value.h"

namespace kvscope::jinja {

// str.strip/lstrip/rstrip: Python's whitespace, or the characters of `chars`.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
// str.title (each word's first letter up, the rest down), or str.capitalize.
std::string py_title(const std::string& s, bool capitalize_only);
// s.name(args): strip, lstrip, rstrip, split, startswith, endswith, upper,
// lower, title, capitalize, replace, find, count, join, isdigit, isspace.
Value str_method(const std::string& s, const std::string& name, Args& a);

}  // namespace kvscope::jinja
