// Tokens -> a template tree, by Jinja2 3.1's grammar and precedence
// (lowest first): a if b else c; or; and; not; comparisons and in; + -;
// ~; * / // %; **; unary - +; then primaries with .attr, [item], (call),
// | filter and "is" test. Tags it does not implement (include, extends,
// block, raw, call, filter, ...) are Unsupported, never skipped.
#include <set>

#include "model/chat/jinja.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_lex.h"

namespace kvscope::jinja {

namespace {

// Nesting a real template never reaches: the parser and the evaluator
// recurse once per level, so a hostile file must not choose the depth.
constexpr int kMaxNesting = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}
  Body parse_body(const std::set<std::string>& ends, std::string* ended_by);

 private:
  std::vector<Token> t_;
  size_t k_ = 0;
  int depth_ = 0;
  struct Nested {  // one level deeper for the guard's lifetime
    explicit Nested(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) {
        throw Unsupported("line " + std::to_string(p_.cur().line) + ": nesting deeper than " +
                          std::to_string(kMaxNesting) + " levels");
      }
    }
    ~Nested() { --p_.depth_; }
    Parser& p_;
  };

  const Token& cur() const { return t_[k_]; }
  bool is_op(const char* op) const { return cur().type == Token::kOp && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Token::kName && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++k_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++k_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const Token& t = cur();
    const std::string found = t.type == Token::kEof        ? "the end of the template"
                              : t.type == Token::kBlockEnd ? "%}"
                              : t.type == Token::kVarEnd   ? "}}"
                                                           : "'" + t.value + "'";
    throw Unsupported("line " + std::to_string(t.line) + ": expected " + what + ", found " + found);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("'") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != Token::kName) fail("a name");
    return t_[k_++].value;
  }
  void expect_block_end() {
    if (cur().type != Token::kBlockEnd) fail("%}");
    ++k_;
  }
  ExprPtr node(Expr::Op op, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->op = op;
    e->name = std::move(name);
    e->line = cur().line;
    return e;
  }
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = node(Expr::Op::kBinary, op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // A statement node of `kind` at the current tag's name, which it consumes.
  NodePtr open_statement(Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = cur().line;
    ++k_;
    return n;
  }
  // The body up to {% end_tag %}, that closing tag consumed.
  Body body_until(const char* end_tag) {
    std::string end;
    Body b = parse_body({end_tag}, &end);
    expect_block_end();
    return b;
  }
  NodePtr parse_statement();
  NodePtr parse_if();
  NodePtr parse_for();
  NodePtr parse_set();
  NodePtr parse_macro();
  std::vector<std::string> parse_targets();

 public:
  ExprPtr parse_tuple(bool with_condexpr = true);
  ExprPtr parse_expression(bool with_condexpr = true) { return with_condexpr ? parse_condexpr() : parse_or(); }

 private:
  ExprPtr parse_condexpr();
  ExprPtr parse_chain(Expr::Op op, const char* word, ExprPtr (Parser::*next)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr e);
  void parse_call_args(Expr& call);
};

Body Parser::parse_body(const std::set<std::string>& ends, std::string* ended_by) {
  Body body;
  for (;;) {
    const Token& t = cur();
    if (t.type == Token::kEof) {
      if (!ends.empty()) fail("{% " + *ends.begin() + " %}");
      return body;
    }
    if (t.type == Token::kText) {
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kText;
      n->text = t.value;
      body.push_back(std::move(n));
      ++k_;
    } else if (t.type == Token::kVarBegin) {
      ++k_;
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kOutput;
      n->line = t.line;
      n->expr = parse_tuple();
      if (cur().type != Token::kVarEnd) fail("}}");
      ++k_;
      body.push_back(std::move(n));
    } else {  // a block tag
      ++k_;
      if (cur().type == Token::kName && ends.count(cur().value)) {
        *ended_by = t_[k_++].value;
        return body;
      }
      body.push_back(parse_statement());
    }
  }
}

NodePtr Parser::parse_statement() {
  const Nested guard(*this);
  const std::string tag = cur().type == Token::kName ? cur().value : "";
  auto simple = [&](Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    ++k_;
    expect_block_end();
    return n;
  };
  if (tag == "if") return parse_if();
  if (tag == "for") return parse_for();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "break") return simple(Node::Kind::kBreak);
  if (tag == "continue") return simple(Node::Kind::kContinue);
  if (tag == "generation") {
    auto n = simple(Node::Kind::kScope);
    n->body = body_until("endgeneration");
    return n;
  }
  throw Unsupported("line " + std::to_string(cur().line) + ": the tag {% " + (tag.empty() ? cur().value : tag) + " %}");
}

NodePtr Parser::parse_if() {
  auto n = std::make_unique<Node>();
  n->kind = Node::Kind::kIf;
  ++k_;
  for (std::string end = "elif"; end == "elif";) {
    ExprPtr cond = parse_tuple(false);
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"}, &end);
    n->branches.emplace_back(std::move(cond), std::move(body));
    if (end == "else") {
      expect_block_end();
      n->branches.emplace_back(nullptr, parse_body({"endif"}, &end));
    }
  }
  expect_block_end();
  return n;
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  do {
    names.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return names;
}

NodePtr Parser::parse_for() {
  NodePtr n = open_statement(Node::Kind::kFor);
  n->targets = parse_targets();
  if (!skip_name("in")) fail("'in'");
  n->expr = parse_tuple(false);
  if (skip_name("if")) n->cond = parse_expression();
  if (is_name("recursive")) throw Unsupported("line " + std::to_string(cur().line) + ": recursive for loops");
  expect_block_end();
  std::string end;
  n->body = parse_body({"endfor", "else"}, &end);
  if (end == "else") {
    expect_block_end();
    n->else_body = body_until("endfor");
    return n;
  }
  expect_block_end();
  return n;
}

NodePtr Parser::parse_set() {
  NodePtr n = open_statement(Node::Kind::kSet);
  const std::string first = expect_name();
  if (skip_op(".")) {
    n->targets = {first};
    n->attr = expect_name();
  } else {
    n->targets = {first};
    while (skip_op(",")) n->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    n->expr = parse_tuple();
    expect_block_end();
    return n;
  }
  if (!n->attr.empty() || n->targets.size() != 1) fail("'='");
  if (is_op("|")) throw Unsupported("line " + std::to_string(cur().line) + ": filtered {% set %} blocks");
  expect_block_end();
  n->kind = Node::Kind::kSetBlock;
  n->body = body_until("endset");
  return n;
}

NodePtr Parser::parse_macro() {
  NodePtr n = open_statement(Node::Kind::kMacro);
  n->targets = {expect_name()};
  expect_op("(");
  while (!skip_op(")")) {
    if (n->targets.size() > 1) expect_op(",");
    n->targets.push_back(expect_name());
    n->defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
  }
  expect_block_end();
  n->body = body_until("endmacro");
  return n;
}

ExprPtr Parser::parse_tuple(bool with_condexpr) {
  ExprPtr first = parse_expression(with_condexpr);
  if (!is_op(",")) return first;
  auto t = node(Expr::Op::kTuple);
  t->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().type == Token::kBlockEnd || cur().type == Token::kVarEnd || is_op(")")) break;
    t->args.push_back(parse_expression(with_condexpr));
  }
  return t;
}

ExprPtr Parser::parse_condexpr() {
  const Nested guard(*this);
  ExprPtr e = parse_or();
  while (skip_name("if")) {
    auto c = node(Expr::Op::kCond);
    c->args.push_back(parse_or());
    c->args.push_back(std::move(e));
    c->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    e = std::move(c);
  }
  return e;
}

// a WORD b WORD c ..., left to right (or, and).
ExprPtr Parser::parse_chain(Expr::Op op, const char* word, ExprPtr (Parser::*next)()) {
  ExprPtr e = (this->*next)();
  while (skip_name(word)) {
    auto n = node(op);
    n->args.push_back(std::move(e));
    n->args.push_back((this->*next)());
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  return parse_chain(Expr::Op::kOr, "or", &Parser::parse_and);
}

ExprPtr Parser::parse_and() {
  return parse_chain(Expr::Op::kAnd, "and", &Parser::parse_not);
}

ExprPtr Parser::parse_not() {
  if (!skip_name("not")) return parse_compare();
  auto n = node(Expr::Op::kNot);
  n->args.push_back(parse_not());
  return n;
}

// Chained comparisons (a < b < c) as Python: each pair, and-ed.
ExprPtr Parser::parse_compare() {
  ExprPtr e = parse_math1();
  ExprPtr chain;
  for (;;) {
    std::string op;
    for (const char* o : {"==", "!=", "<", ">", "<=", ">="}) {
      if (is_op(o)) op = o;
    }
    if (!op.empty()) {
      ++k_;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && t_[k_ + 1].type == Token::kName && t_[k_ + 1].value == "in") {
      k_ += 2;
      op = "notin";
    } else {
      break;
    }
    ExprPtr right = parse_math1();
    if (chain) throw Unsupported("line " + std::to_string(cur().line) + ": chained comparisons");
    chain = binary(op, std::move(e), std::move(right));
  }
  return chain ? std::move(chain) : std::move(e);
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = t_[k_++].value;
    e = binary(op, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  ExprPtr e = parse_math2();
  while (skip_op("~")) e = binary("~", std::move(e), parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = t_[k_++].value;
    e = binary(op, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (skip_op("**")) e = binary("**", std::move(e), parse_unary(true));
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const Nested guard(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(t_[k_++].value == "-" ? Expr::Op::kNeg : Expr::Op::kPos);
    e->args.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  ExprPtr e = node(Expr::Op::kLiteral);
  if (t.type == Token::kName) {
    const std::string& v = t.value;
    if (v == "true" || v == "True" || v == "false" || v == "False") {
      e->value = Value::boolean(v[0] == 't' || v[0] == 'T');
    } else if (v == "none" || v == "None") {
      e->value = Value::none();
    } else {
      e->op = Expr::Op::kName;
      e->name = v;
    }
    ++k_;
  } else if (t.type == Token::kString) {
    std::string s;
    while (cur().type == Token::kString) s += t_[k_++].value;  // adjacent literals join
    e->value = Value::string(s);
  } else if (t.type == Token::kInt || t.type == Token::kFloat) {
    try {
      e->value = t.type == Token::kInt ? Value::integer(std::stoll(t.value)) : Value::number(std::stod(t.value));
    } catch (const std::exception&) {
      throw Unsupported("line " + std::to_string(t.line) + ": the number " + t.value + " (out of range)");
    }
    ++k_;
  } else if (skip_op("(")) {
    if (skip_op(")")) {
      e->value = Value::tuple({});
      return e;
    }
    e = parse_tuple();
    expect_op(")");
  } else if (skip_op("[")) {
    e->op = Expr::Op::kList;
    while (!skip_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (skip_op("]")) break;
      e->args.push_back(parse_expression());
    }
  } else if (skip_op("{")) {
    e->op = Expr::Op::kDict;
    while (!skip_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (skip_op("}")) break;
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
    }
  } else {
    fail("an expression");
  }
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".") || is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      auto c = node(Expr::Op::kCall);
      c->args.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr e) {
  if (skip_op(".")) {
    if (cur().type == Token::kInt) {
      auto item = node(Expr::Op::kItem);
      item->args.push_back(std::move(e));
      auto idx = node(Expr::Op::kLiteral);
      const Token& t = t_[k_++];
      try {
        idx->value = Value::integer(std::stoll(t.value));
      } catch (const std::exception&) {
        throw Unsupported("line " + std::to_string(t.line) + ": the index ." + t.value + " (out of range)");
      }
      item->args.push_back(std::move(idx));
      return item;
    }
    auto a = node(Expr::Op::kAttr, expect_name());
    a->args.push_back(std::move(e));
    return a;
  }
  expect_op("[");
  ExprPtr parts[3];
  bool slice = false;
  for (int part = 0; part < 3; ++part) {
    if (!is_op(":") && !is_op("]")) parts[part] = parse_expression();
    if (!skip_op(":")) break;
    slice = true;
  }
  expect_op("]");
  auto s = node(slice ? Expr::Op::kSlice : Expr::Op::kItem);
  s->args.push_back(std::move(e));
  if (!slice && !parts[0]) fail("an index");
  for (int part = 0; part < (slice ? 3 : 1); ++part) s->args.push_back(std::move(parts[part]));
  return s;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  while (!skip_op(")")) {
    if (call.args.size() + call.kwargs.size() > 1) expect_op(",");
    if (skip_op(")")) break;
    if (is_op("*") || is_op("**")) throw Unsupported("line " + std::to_string(cur().line) + ": *args in calls");
    if (cur().type == Token::kName && t_[k_ + 1].type == Token::kOp && t_[k_ + 1].value == "=") {
      std::string key = t_[k_].value;
      k_ += 2;
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      call.args.push_back(parse_expression());
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (skip_op("|")) {
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      auto f = node(Expr::Op::kFilter, name);
      f->args.push_back(std::move(e));
      if (is_op("(")) parse_call_args(*f);
      e = std::move(f);
    } else if (skip_name("is")) {
      const bool negated = skip_name("not");
      auto t = node(Expr::Op::kTest, expect_name());
      t->negated = negated;
      t->args.push_back(std::move(e));
      const Token& c = cur();
      const bool arg_starts = c.type == Token::kName || c.type == Token::kString || c.type == Token::kInt ||
                              c.type == Token::kFloat || is_op("[") || is_op("{");
      if (is_op("(")) {
        parse_call_args(*t);
      } else if (arg_starts && !is_name("else") && !is_name("or") && !is_name("and")) {
        t->args.push_back(parse_postfix(parse_primary()));
      }
      e = std::move(t);
    } else if (is_op("(")) {
      auto c = node(Expr::Op::kCall);
      c->args.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

}  // namespace

std::shared_ptr<const Template> parse(const std::string& source) {
  Parser p(tokenize(source));
  auto t = std::make_shared<Template>();
  std::string end;
  t->body = p.parse_body({}, &end);
  return t;
}

}  // namespace kvscope::jinja
