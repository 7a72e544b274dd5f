// Template text -> tokens (jinja_lex.cpp): text, tag markers and the
// expression tokens inside tags.
#pragma once

#include <string>
#include <vector>

#include "model/chat/jinja_value.h"

namespace kvscope::jinja {

struct Token {
  enum Type : uint8_t { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type;
  std::string value;  // kText: the text after whitespace control; kString: decoded; kOp: the operator
  int line;
};

// Throws Unsupported on text it cannot split (an unclosed tag or string).
std::vector<Token> tokenize(const std::string& source);

}  // namespace kvscope::jinja
