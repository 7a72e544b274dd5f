// A parsed template: expressions and statements as Jinja2's parser builds
// them (jinja_parse.cpp), walked by the evaluator (jinja_eval.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_value.h"

namespace kvscope::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Op : uint8_t {
    kLiteral,  // value
    kName,     // name
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts absent)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kNot,
    kNeg,
    kPos,
    kBinary,  // args[0] name args[1]: + - * / // % ** ~ == != < > <= >= in notin
    kAnd,
    kOr,
    kCond,  // args[1] if args[0] else args[2] (args[2] null: undefined)
    kList,
    kTuple,
    kDict,  // kwargs: key expression pairs as args (k0, v0, k1, v1, ...)
  };
  Op op = Op::kLiteral;
  std::string name;
  Value value;
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  int line = 0;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind : uint8_t {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body); the else branch has no condition
    kFor,       // for targets in expr [if cond]: body [else: else_body]
    kSet,       // set targets = expr; or set targets[0].attr = expr (namespace)
    kSetBlock,  // {% set name %}body{% endset %}
    kMacro,     // macro name(params = defaults): body
    kBreak,
    kContinue,
    kScope,  // a body rendered as is: {% generation %}
  };
  Kind kind = Kind::kText;
  std::string text;
  ExprPtr expr;  // kOutput, kFor's iterable, kSet's value
  ExprPtr cond;  // kFor's filter
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;  // kFor, kSet, kSetBlock; kMacro: its name then its parameters
  std::string attr;                  // kSet on a namespace: the attribute
  std::vector<ExprPtr> defaults;     // kMacro: one per parameter (null: none)
  Body body, else_body;
  int line = 0;
};

struct Template {
  Body body;
};

}  // namespace kvscope::jinja
