// The non-data objects a template can hold: namespace(), macros, the loop variable, bound
// methods ("abc".upper) and global functions (range, raise_exception, strftime_now, ...).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace md::jinja {

// jinja2's namespace(): the one mutable object, assigned with {% set ns.attr = value %}.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  Value getattr(std::string_view name) const override;
  bool set_attr(const std::string& name, Value value) override;
  // Drops the attributes (breaks reference cycles such as ns.self = ns after a render).
  void clear() { attrs_.clear(); }

 private:
  Dict attrs_;
};

// A {% macro %}: keeps its defining scope weakly (scopes may hold the macro; a strong reference
// would leak the cycle).
class Macro : public Object {
 public:
  Macro(const Stmt& def, std::weak_ptr<Frame> closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + def_.name + "'>"; }
  Value getattr(std::string_view name) const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override;

 private:
  const Stmt& def_;
  std::weak_ptr<Frame> closure_;
};

// The `loop` variable of a for loop.
class LoopContext : public Object, public std::enable_shared_from_this<LoopContext> {
 public:
  explicit LoopContext(std::shared_ptr<const std::vector<Value>> items)
      : items_(std::move(items)) {}
  void set_index(std::size_t index0) { index0_ = index0; }
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  Value getattr(std::string_view name) const override;
  Value cycle(const CallArgs& args) const;
  Value changed(const CallArgs& args);

 private:
  std::shared_ptr<const std::vector<Value>> items_;
  std::size_t index0_ = 0;
  std::vector<Value> last_changed_;
  bool has_last_changed_ = false;
};

// A callable implemented in C++ (globals and methods bound to their receiver).
class NativeFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  NativeFunction(std::string name, Fn fn, std::string type = "builtin_function_or_method")
      : name_(std::move(name)), type_(std::move(type)), fn_(std::move(fn)) {}
  std::string type_name() const override { return type_; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, args); }

 private:
  std::string name_;
  std::string type_;
  Fn fn_;
};

// Global names available to every template (jinja2 defaults + transformers' additions).
// Returns nullptr-like undefined when the name is not a global.
Value lookup_global(std::string_view name);

}  // namespace md::jinja
