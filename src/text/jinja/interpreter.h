// Renders a parsed Jinja template: scopes, statements and expressions with jinja2's semantics
// (sandboxed, immutable containers, default Undefined), within limits that stop runaway
// templates. One Interpreter renders one template once; it is not shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace md::jinja {

// Safety limits for one render. Defaults are far above what chat templates need.
struct RenderLimits {
  std::size_t max_output_bytes = 64u << 20;  // also caps any single string value
  std::uint64_t max_steps = 50'000'000;      // evaluated nodes + loop iterations
  int max_call_depth = 100;                  // nested macro calls
};

// A variable scope. Loop iterations, macro calls and with-blocks get a child scope; `set` writes
// to the innermost one, lookups walk outwards (this reproduces jinja2's scoping rules).
class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* lookup(std::string_view name) const;
  void set(std::string_view name, Value value);
  const std::shared_ptr<Frame>& parent() const { return parent_; }

 private:
  std::shared_ptr<Frame> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  Interpreter(const std::string& template_name, const RenderLimits& limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with the given top-level variables; throws TemplateError.
  std::string render(const StmtList& body, std::vector<std::pair<std::string, Value>> context);

  // --- used by builtins, filters and objects ---
  Value eval(const Expr& expr, const std::shared_ptr<Frame>& frame);
  Value call_value(const Value& callee, CallArgs& args);
  Value call_macro(const Stmt& def, const std::shared_ptr<Frame>& closure, CallArgs& args);
  Value apply_filter(std::string_view name, Value operand, CallArgs& args);
  bool apply_test(std::string_view name, const Value& operand, CallArgs& args);
  // Registers a namespace so that reference cycles through it are broken after the render.
  void track(std::shared_ptr<Object> object) { tracked_.push_back(std::move(object)); }
  void step();

 private:
  // Statement execution; returns a non-normal flow for break/continue.
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_list(const StmtList& body, const std::shared_ptr<Frame>& frame);
  Flow exec(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void exec_output(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  Flow exec_if(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void exec_for(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void exec_set(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void exec_set_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void exec_filter_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  Flow exec_with(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
  void assign(const Target& target, const Value& value, const std::shared_ptr<Frame>& frame);
  std::string capture(const StmtList& body, const std::shared_ptr<Frame>& frame);
  Value apply_filter_chain(const Expr* chain, Value input, const std::shared_ptr<Frame>& frame);
  void write(std::string_view text);

  // Expression evaluation helpers (eval.cpp).
  Value eval_node(const Expr& expr, const std::shared_ptr<Frame>& frame);
  Value eval_name(const Expr& expr, const std::shared_ptr<Frame>& frame);
  Value eval_compare(const Expr& expr, const std::shared_ptr<Frame>& frame);
  Value eval_getitem(const Expr& expr, const std::shared_ptr<Frame>& frame);
  CallArgs eval_args(const Expr& expr, const std::shared_ptr<Frame>& frame);

  std::string name_;
  RenderLimits limits_;
  std::uint64_t steps_ = 0;
  std::size_t bytes_written_ = 0;
  int call_depth_ = 0;
  std::string* out_ = nullptr;
  std::vector<std::shared_ptr<Object>> tracked_;
};

}  // namespace md::jinja
