// Expression evaluation. Errors raised by value operations carry no position; they are caught
// at the innermost node being evaluated and rethrown as TemplateError with its line and column.
#include <new>

#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"

namespace md::jinja {

Value Interpreter::eval(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  try {
    step();
    return eval_node(expr, frame);
  } catch (const ValueError& e) {
    throw TemplateError(e.kind(), name_, expr.loc, e.what());
  }
}

CallArgs Interpreter::eval_args(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  CallArgs args;
  args.args.reserve(expr.children.size());
  for (const auto& child : expr.children) args.args.push_back(eval(*child, frame));
  for (const auto& kw : expr.kwargs) args.kwargs.emplace_back(kw.name, eval(*kw.value, frame));
  return args;
}

Value Interpreter::eval_name(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  if (const Value* v = frame->lookup(expr.name)) return *v;
  return lookup_global(expr.name);
}

Value Interpreter::eval_getitem(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  Value obj = eval(*expr.operand, frame);
  const Expr& index = *expr.children.front();
  if (index.kind != ExprKind::kSlice) return get_item(obj, eval(index, frame));
  Value parts[3];
  for (int i = 0; i < 3; ++i) {
    const auto& part = index.children[static_cast<std::size_t>(i)];
    parts[i] = part ? eval(*part, frame) : Value::none();
  }
  return get_slice(obj, parts[0], parts[1], parts[2]);
}

namespace {

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return py_equal(a, b);
    case CompareOp::kNe:
      return !py_equal(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
    case CompareOp::kLt:
      return py_less(a, b, "<");
    case CompareOp::kLe:
      return py_less(a, b, "<=") || py_equal(a, b);
    case CompareOp::kGt:
      py_less(a, b, ">");  // reports unorderable types in Python's operand order
      return py_less(b, a, ">");
    case CompareOp::kGe:
      py_less(a, b, ">=");
      return py_less(b, a, ">=") || py_equal(a, b);
  }
  return false;
}

}  // namespace

Value Interpreter::eval_compare(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  Value left = eval(*expr.children[0], frame);
  for (std::size_t i = 0; i < expr.compare_ops.size(); ++i) {
    Value right = eval(*expr.children[i + 1], frame);
    if (!compare(expr.compare_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::call_value(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.obj().callable()) return callee.obj().call(*this, args);
  value_fail("'{}' object is not callable", type_name(callee));
}

Value Interpreter::apply_filter(std::string_view name, Value operand, CallArgs& args) {
  return call_filter(name, std::move(operand), args, *this);
}

bool Interpreter::apply_test(std::string_view name, const Value& operand, CallArgs& args) {
  return call_test(name, operand, args, *this);
}

Value Interpreter::eval_node(const Expr& expr, const std::shared_ptr<Frame>& frame) {
  switch (expr.kind) {
    case ExprKind::kConst:
      return expr.value;
    case ExprKind::kName:
      return eval_name(expr, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.children.size());
      for (const auto& c : expr.children) items.push_back(eval(*c, frame));
      return Value::sequence(std::move(items),
                             expr.kind == ExprKind::kList ? SeqKind::kList : SeqKind::kTuple);
    }
    case ExprKind::kDict: {
      Dict d;
      for (std::size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        Value key = eval(*expr.children[i], frame);
        require_hashable(key);
        d.set(std::move(key), eval(*expr.children[i + 1], frame));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetattr:
      return get_attribute(eval(*expr.operand, frame), expr.name);
    case ExprKind::kGetitem:
      return eval_getitem(expr, frame);
    case ExprKind::kSlice:
      throw ValueError("a slice can only be used as a subscript");
    case ExprKind::kCall: {
      Value callee = eval(*expr.operand, frame);
      CallArgs args = eval_args(expr, frame);
      return call_value(callee, args);
    }
    case ExprKind::kFilter: {
      Value operand = eval(*expr.operand, frame);
      CallArgs args = eval_args(expr, frame);
      return apply_filter(expr.name, std::move(operand), args);
    }
    case ExprKind::kTest: {
      Value operand = eval(*expr.operand, frame);
      CallArgs args = eval_args(expr, frame);
      return Value::boolean(apply_test(expr.name, operand, args));
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*expr.operand, frame)));
    case ExprKind::kNeg:
      return negate(eval(*expr.operand, frame));
    case ExprKind::kPos:
      return positive(eval(*expr.operand, frame));
    case ExprKind::kBinary: {
      Value a = eval(*expr.children[0], frame);
      Value b = eval(*expr.children[1], frame);
      return binary_op(expr.binary_op, a, b);
    }
    case ExprKind::kAnd: {
      // Python's and/or return one of the operands, not a bool.
      Value a = eval(*expr.children[0], frame);
      return truthy(a) ? eval(*expr.children[1], frame) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*expr.children[0], frame);
      return truthy(a) ? a : eval(*expr.children[1], frame);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const auto& c : expr.children) {
        Value v = eval(*c, frame);
        out += v.is_string() ? v.str() : to_str(v);
        check_size(out.size());
      }
      return Value::string(std::move(out));
    }
    case ExprKind::kCompare:
      return eval_compare(expr, frame);
    case ExprKind::kCondExpr:
      if (truthy(eval(*expr.children[0], frame))) return eval(*expr.operand, frame);
      if (expr.children[1]) return eval(*expr.children[1], frame);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was "
          "defined.",
          expr.loc.line));
  }
  return Value();
}

}  // namespace md::jinja
