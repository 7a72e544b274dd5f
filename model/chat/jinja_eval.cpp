// Walks a parsed template (jinja_ast.h) with Jinja2's scoping: a for loop's
// body gets a fresh scope each iteration (so {% set %} inside it is gone
// after it: templates use namespace() to carry values out), an if does not;
// macros render their body in their own scope and return the text.
#include <algorithm>

#include "model/chat/jinja.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_builtins.h"

namespace kvscope::jinja {

namespace {

// Guards against templates that never end: output, loop lengths and macro
// recursion are bounded far above what any chat template produces.
constexpr size_t kMaxOutputBytes = 64u << 20;
constexpr int64_t kMaxRange = 100'000;
constexpr int kMaxDepth = 200;

struct Frame {
  Dict vars;
  Frame* parent = nullptr;
  Value* find(const std::string& name) {
    for (auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return parent ? parent->find(name) : nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const Value& globals) : globals_(globals) {}
  Flow exec(const Body& body, Frame& f, std::string& out);
  Value eval(const Expr& e, Frame& f);

 private:
  const Value& globals_;
  int depth_ = 0;

  Value lookup(const std::string& name, Frame& f);
  Value call(const Expr& e, Frame& f);
  Args args_of(const Expr& e, Frame& f, size_t first);
  Flow exec_for(const Node& n, Frame& f, std::string& out);
  void exec_set(const Node& n, Frame& f, Value v);
  Value make_macro(const Node& n, Frame& f);
};

Value range_of(Args& a) {
  for (const Value& v : a.pos) {
    if (v.kind != Value::Kind::kInt) throw RenderError("range() takes integers, not " + type_name(v));
  }
  int64_t start = 0, stop = 0, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].i;
  } else if (a.pos.size() >= 2) {
    start = a.pos[0].i;
    stop = a.pos[1].i;
    if (a.pos.size() > 2) step = a.pos[2].i;
  }
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  List out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) throw RenderError("range() longer than a template needs");
    out.push_back(Value::integer(k));
  }
  return Value::make_list(out);
}

Value namespace_of(Args& a) {
  Value ns = Value::make_dict();
  ns.kind = Value::Kind::kNamespace;
  if (!a.pos.empty() && a.pos[0].kind == Value::Kind::kDict) *ns.dict = *a.pos[0].dict;
  for (auto& [k, v] : a.kw) ns.set(k, v);
  return ns;
}

Value Renderer::lookup(const std::string& name, Frame& f) {
  if (Value* v = f.find(name)) return *v;
  if (const Value* g = globals_.find(name)) return *g;
  if (name == "range") return Value::callable(range_of);
  if (name == "namespace") return Value::callable(namespace_of);
  if (name == "dict") {
    return Value::callable([](Args& a) {
      Dict d;
      for (auto& [k, v] : a.kw) d.emplace_back(k, v);
      return Value::make_dict(d);
    });
  }
  return Value::undefined(name);
}

Args Renderer::args_of(const Expr& e, Frame& f, size_t first) {
  Args a;
  for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
  for (const auto& [key, x] : e.kwargs) a.kw.emplace_back(key, eval(*x, f));
  return a;
}

Value Renderer::call(const Expr& e, Frame& f) {
  const Value fn = eval(*e.args[0], f);
  if (fn.kind != Value::Kind::kCallable) {
    if (fn.is_undefined() && fn.b) throw Unsupported("the method call " + fn.s);
    if (fn.is_undefined()) undefined_error(fn);
    throw RenderError("'" + type_name(fn) + "' object is not callable");
  }
  Args a = args_of(e, f, 1);
  return (*fn.fn)(a);
}

Value Renderer::eval(const Expr& e, Frame& f) {
  switch (e.op) {
    case Expr::Op::kLiteral:
      return e.value;
    case Expr::Op::kName:
      return lookup(e.name, f);
    case Expr::Op::kAttr:
      return get_attr(eval(*e.args[0], f), e.name);
    case Expr::Op::kItem:
      return get_item(eval(*e.args[0], f), eval(*e.args[1], f));
    case Expr::Op::kSlice: {
      auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k], f) : Value::none(); };
      return get_slice(eval(*e.args[0], f), part(1), part(2), part(3));
    }
    case Expr::Op::kCall:
      return call(e, f);
    case Expr::Op::kFilter: {
      Args a = args_of(e, f, 0);
      return apply_filter(e.name, a);
    }
    case Expr::Op::kTest: {
      Args a = args_of(e, f, 0);
      return Value::boolean(apply_test(e.name, a) != e.negated);
    }
    case Expr::Op::kNot:
      return Value::boolean(!truthy(eval(*e.args[0], f)));
    case Expr::Op::kNeg:
      return negate(eval(*e.args[0], f));
    case Expr::Op::kPos:
      return binary_op("+", Value::integer(0), eval(*e.args[0], f));
    case Expr::Op::kBinary:
      return binary_op(e.name, eval(*e.args[0], f), eval(*e.args[1], f));
    case Expr::Op::kAnd: {
      Value a = eval(*e.args[0], f);
      return truthy(a) ? eval(*e.args[1], f) : a;
    }
    case Expr::Op::kOr: {
      Value a = eval(*e.args[0], f);
      return truthy(a) ? a : eval(*e.args[1], f);
    }
    case Expr::Op::kCond:
      if (truthy(eval(*e.args[0], f))) return eval(*e.args[1], f);
      return e.args[2] ? eval(*e.args[2], f) : Value::undefined("the missing else branch");
    case Expr::Op::kList:
    case Expr::Op::kTuple: {
      List items;
      for (const auto& x : e.args) items.push_back(eval(*x, f));
      return e.op == Expr::Op::kList ? Value::make_list(items) : Value::tuple(items);
    }
    case Expr::Op::kDict: {
      Value d = Value::make_dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k], f);
        if (!key.is_string()) throw Unsupported("dict literals with " + type_name(key) + " keys");
        d.set(key.s, eval(*e.args[k + 1], f));
      }
      return d;
    }
  }
  return Value::undefined();
}

void Renderer::exec_set(const Node& n, Frame& f, Value v) {
  if (!n.attr.empty()) {
    Value ns = lookup(n.targets[0], f);
    if (ns.kind != Value::Kind::kNamespace) throw RenderError("cannot assign attribute on non-namespace object");
    ns.set(n.attr, std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    f.set(n.targets[0], std::move(v));
    return;
  }
  const List items = iterate(v);
  if (items.size() != n.targets.size()) {
    throw RenderError("cannot unpack " + std::to_string(items.size()) + " values into " +
                      std::to_string(n.targets.size()) + " names");
  }
  for (size_t k = 0; k < items.size(); ++k) f.set(n.targets[k], items[k]);
}

Flow Renderer::exec_for(const Node& n, Frame& f, std::string& out) {
  List items = iterate(eval(*n.expr, f));
  auto bind = [&](Frame& scope, const Value& item) {
    if (n.targets.size() == 1) {
      scope.set(n.targets[0], item);
      return;
    }
    Node unpack;
    unpack.targets = n.targets;
    exec_set(unpack, scope, item);
  };
  if (n.cond) {
    List kept;
    for (const Value& item : items) {
      Frame scope{{}, &f};
      bind(scope, item);
      if (truthy(eval(*n.cond, scope))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const auto len = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < len; ++k) {
    Frame scope{{}, &f};
    bind(scope, items[static_cast<size_t>(k)]);
    Value loop = Value::make_dict({{"index", Value::integer(k + 1)},
                                   {"index0", Value::integer(k)},
                                   {"revindex", Value::integer(len - k)},
                                   {"revindex0", Value::integer(len - k - 1)},
                                   {"first", Value::boolean(k == 0)},
                                   {"last", Value::boolean(k == len - 1)},
                                   {"length", Value::integer(len)},
                                   {"depth", Value::integer(1)},
                                   {"depth0", Value::integer(0)}});
    loop.set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("loop.previtem"));
    loop.set("nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value::undefined("loop.nextitem"));
    scope.set("loop", loop);
    if (exec(n.body, scope, out) == Flow::kBreak) break;
  }
  if (len == 0) return exec(n.else_body, f, out);
  return Flow::kNormal;
}

Value Renderer::make_macro(const Node& n, Frame& f) {
  Frame* defined_in = &f;
  return Value::callable([this, &n, defined_in](Args& a) {
    if (++depth_ > kMaxDepth) throw RenderError("macro recursion deeper than " + std::to_string(kMaxDepth));
    Frame scope{{}, defined_in};
    const size_t n_params = n.targets.size() - 1;
    if (a.pos.size() > n_params)
      throw RenderError("macro '" + n.targets[0] + "' takes not more than " + std::to_string(n_params) +
                        " argument(s)");
    for (size_t k = 0; k < n_params; ++k) {
      const std::string& p = n.targets[k + 1];
      Value v = a.get(k, p.c_str());
      if (v.is_undefined() && n.defaults[k]) v = eval(*n.defaults[k], scope);
      if (v.is_undefined()) v = Value::undefined(p);
      scope.set(p, v);
    }
    std::string text;
    exec(n.body, scope, text);
    --depth_;
    return Value::string(text);
  });
}

Flow Renderer::exec(const Body& body, Frame& f, std::string& out) {
  for (const NodePtr& np : body) {
    const Node& n = *np;
    switch (n.kind) {
      case Node::Kind::kText:
        out += n.text;
        break;
      case Node::Kind::kOutput:
        out += str(eval(*n.expr, f));
        break;
      case Node::Kind::kIf:
        for (const auto& [cond, branch] : n.branches) {
          if (!cond || truthy(eval(*cond, f))) {
            const Flow fl = exec(branch, f, out);
            if (fl != Flow::kNormal) return fl;
            break;
          }
        }
        break;
      case Node::Kind::kFor:
        exec_for(n, f, out);
        break;
      case Node::Kind::kSet:
        exec_set(n, f, eval(*n.expr, f));
        break;
      case Node::Kind::kSetBlock: {
        std::string text;
        exec(n.body, f, text);
        f.set(n.targets[0], Value::string(text));
        break;
      }
      case Node::Kind::kMacro:
        f.set(n.targets[0], make_macro(n, f));
        break;
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kScope: {
        const Flow fl = exec(n.body, f, out);
        if (fl != Flow::kNormal) return fl;
        break;
      }
    }
    if (out.size() > kMaxOutputBytes) throw RenderError("the template's output passed 64 MiB");
  }
  return Flow::kNormal;
}

}  // namespace

std::string render(const Template& t, const Value& globals) {
  if (!globals.is_mapping()) throw RenderError("a template's globals must be a dict");
  Renderer r(globals);
  Frame root;
  std::string out;
  r.exec(t.body, root, out);
  return out;
}

}  // namespace kvscope::jinja
