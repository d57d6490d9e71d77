// Statement execution, scopes and macro calls.
#include "text/jinja/interpreter.h"

#include <new>

#include "text/jinja/builtins.h"
#include "text/jinja/objects.h"

namespace md::jinja {

const Value* Frame::lookup(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent_.get()) {
    for (const auto& [key, value] : f->vars_) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Frame::set(std::string_view name, Value value) {
  for (auto& [key, existing] : vars_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

Interpreter::Interpreter(const std::string& template_name, const RenderLimits& limits)
    : name_(template_name), limits_(limits) {}

Interpreter::~Interpreter() {
  // Namespaces are the only mutable objects, hence the only way to build a reference cycle.
  for (auto& object : tracked_) {
    if (auto* ns = dynamic_cast<Namespace*>(object.get())) ns->clear();
  }
}

std::string Interpreter::render(const StmtList& body,
                                std::vector<std::pair<std::string, Value>> context) {
  ScopedSizeLimit size_limit(limits_.max_output_bytes);
  auto globals = std::make_shared<Frame>(nullptr);
  for (auto& [name, value] : context) globals->set(name, std::move(value));
  auto root = std::make_shared<Frame>(globals);
  std::string out;
  out_ = &out;
  try {
    exec_list(body, root);
  } catch (const std::bad_alloc&) {
    throw TemplateError(TemplateError::Kind::kLimit, name_, {}, "out of memory while rendering");
  }
  out_ = nullptr;
  return out;
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) {
    throw ValueError(fmt::format("template exceeded {} evaluation steps", limits_.max_steps),
                     TemplateError::Kind::kLimit);
  }
}

void Interpreter::write(std::string_view text) {
  bytes_written_ += text.size();
  if (bytes_written_ > limits_.max_output_bytes) {
    throw ValueError(fmt::format("template output exceeded {} bytes", limits_.max_output_bytes),
                     TemplateError::Kind::kLimit);
  }
  out_->append(text);
}

Interpreter::Flow Interpreter::exec_list(const StmtList& body,
                                         const std::shared_ptr<Frame>& frame) {
  for (const auto& stmt : body) {
    Flow flow = exec(*stmt, frame);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  try {
    step();
    switch (stmt.kind) {
      case StmtKind::kOutput:
        exec_output(stmt, frame);
        break;
      case StmtKind::kIf:
        return exec_if(stmt, frame);
      case StmtKind::kFor:
        exec_for(stmt, frame);
        break;
      case StmtKind::kSet:
        exec_set(stmt, frame);
        break;
      case StmtKind::kSetBlock:
        exec_set_block(stmt, frame);
        break;
      case StmtKind::kMacro:
        frame->set(stmt.name, Value::object(std::make_shared<Macro>(stmt, frame)));
        break;
      case StmtKind::kFilterBlock:
        exec_filter_block(stmt, frame);
        break;
      case StmtKind::kWith:
        return exec_with(stmt, frame);
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope:
        exec_list(stmt.body, std::make_shared<Frame>(frame));
        break;
    }
  } catch (const ValueError& e) {
    throw TemplateError(e.kind(), name_, stmt.loc, e.what());
  }
  return Flow::kNormal;
}

void Interpreter::exec_output(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  for (const auto& [text, expr] : stmt.pieces) {
    if (!expr) {
      write(text);
      continue;
    }
    Value v = eval(*expr, frame);
    if (v.is_string()) {
      write(v.str());
    } else {
      write(to_str(v));
    }
  }
}

Interpreter::Flow Interpreter::exec_if(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  for (std::size_t i = 0; i < stmt.conditions.size(); ++i) {
    if (truthy(eval(*stmt.conditions[i], frame))) return exec_list(stmt.bodies[i], frame);
  }
  return exec_list(stmt.else_body, frame);
}

void Interpreter::exec_for(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  Value iterable = eval(*stmt.expr, frame);
  std::vector<Value> items = iterate(iterable);
  if (stmt.loop_filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      auto scope = std::make_shared<Frame>(frame);
      assign(stmt.target, item, scope);
      if (truthy(eval(*stmt.loop_filter, scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  auto loop = std::make_shared<LoopContext>(shared_items);
  for (std::size_t i = 0; i < shared_items->size(); ++i) {
    step();
    loop->set_index(i);
    // Each iteration starts from a fresh scope: jinja2 does not carry a `set` inside the loop
    // body over to the next iteration.
    auto scope = std::make_shared<Frame>(frame);
    scope->set("loop", Value::object(loop));
    assign(stmt.target, (*shared_items)[i], scope);
    if (exec_list(stmt.body, scope) == Flow::kBreak) break;
  }
  if (shared_items->empty() && !stmt.else_body.empty()) {
    exec_list(stmt.else_body, std::make_shared<Frame>(frame));
  }
}

void Interpreter::assign(const Target& target, const Value& value,
                         const std::shared_ptr<Frame>& frame) {
  switch (target.kind) {
    case Target::Kind::kName:
      frame->set(target.name, value);
      return;
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = frame->lookup(target.name);
      if (!ns || !ns->is_object() || !ns->obj().set_attr(target.attr, value)) {
        throw ValueError("cannot assign attribute on non-namespace object");
      }
      return;
    }
    case Target::Kind::kTuple: {
      std::vector<Value> items = iterate(value);
      std::size_t n = target.items.size();
      if (items.size() < n) {
        value_fail("not enough values to unpack (expected {}, got {})", n, items.size());
      }
      if (items.size() > n) value_fail("too many values to unpack (expected {})", n);
      for (std::size_t i = 0; i < n; ++i) assign(target.items[i], items[i], frame);
      return;
    }
  }
}

void Interpreter::exec_set(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  assign(stmt.target, eval(*stmt.expr, frame), frame);
}

std::string Interpreter::capture(const StmtList& body, const std::shared_ptr<Frame>& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_list(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Value Interpreter::apply_filter_chain(const Expr* chain, Value input,
                                      const std::shared_ptr<Frame>& frame) {
  if (!chain) return input;
  // The chain is parsed innermost-last: the filter with a null operand is applied first.
  Value operand = chain->operand ? apply_filter_chain(chain->operand.get(), std::move(input), frame)
                                 : std::move(input);
  CallArgs args = eval_args(*chain, frame);
  return apply_filter(chain->name, std::move(operand), args);
}

void Interpreter::exec_set_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  std::string text = capture(stmt.body, std::make_shared<Frame>(frame));
  assign(stmt.target, apply_filter_chain(stmt.expr.get(), Value::string(std::move(text)), frame),
         frame);
}

void Interpreter::exec_filter_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  std::string text = capture(stmt.body, std::make_shared<Frame>(frame));
  Value v = apply_filter_chain(stmt.expr.get(), Value::string(std::move(text)), frame);
  write(to_str(v));
}

Interpreter::Flow Interpreter::exec_with(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
  auto scope = std::make_shared<Frame>(frame);
  std::vector<Value> values;
  for (const auto& v : stmt.values) values.push_back(eval(*v, frame));
  for (std::size_t i = 0; i < values.size(); ++i) assign(stmt.targets[i], values[i], scope);
  return exec_list(stmt.body, scope);
}

Value Interpreter::call_macro(const Stmt& def, const std::shared_ptr<Frame>& closure,
                              CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    throw ValueError(fmt::format("macro calls nested deeper than {}", limits_.max_call_depth),
                     TemplateError::Kind::kLimit);
  }
  auto scope = std::make_shared<Frame>(closure);
  const std::size_t nparams = def.params.size();
  std::size_t positional = std::min(nparams, args.args.size());
  for (std::size_t i = 0; i < positional; ++i) scope->set(def.params[i].name, args.args[i]);
  // Keywords only fill the parameters that positional arguments did not (jinja2's Macro).
  Dict extra_kwargs;
  std::vector<bool> given(nparams, false);
  for (std::size_t i = 0; i < positional; ++i) given[i] = true;
  for (auto& [key, value] : args.kwargs) {
    bool bound = false;
    for (std::size_t i = positional; i < nparams; ++i) {
      if (def.params[i].name == key && !given[i]) {
        scope->set(key, value);
        given[i] = bound = true;
        break;
      }
    }
    if (bound) continue;
    if (!def.catch_kwargs) value_fail("macro '{}' takes no keyword argument '{}'", def.name, key);
    extra_kwargs.set(Value::string(key), value);
  }
  if (args.args.size() > nparams && !def.catch_varargs) {
    value_fail("macro '{}' takes not more than {} argument(s)", def.name, nparams);
  }
  ++call_depth_;
  struct DepthRestore {
    int& depth;
    ~DepthRestore() { --depth; }
  } restore{call_depth_};
  for (std::size_t i = 0; i < nparams; ++i) {
    if (given[i]) continue;
    const MacroParam& p = def.params[i];
    scope->set(p.name, p.default_value ? eval(*p.default_value, scope)
                                       : Value::undefined(fmt::format(
                                             "parameter '{}' was not provided", p.name)));
  }
  if (def.catch_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (def.catch_varargs) {
    std::vector<Value> rest;
    for (std::size_t i = nparams; i < args.args.size(); ++i) rest.push_back(args.args[i]);
    scope->set("varargs", Value::sequence(std::move(rest), SeqKind::kTuple));
  }
  return Value::string(capture(def.body, scope));
}

}  // namespace md::jinja
