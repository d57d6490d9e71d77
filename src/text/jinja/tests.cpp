// The tests (value is name(args)) with jinja2 3.1 semantics.
#include <map>

#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

using TestFn = bool (*)(const Value& v, CallArgs& args);

void no_args(std::string_view name, CallArgs& args) {
  bind_args(name, args, {});
}

Value one_arg(std::string_view name, CallArgs& args, std::string_view param) {
  return bind_args(name, args, {{param, std::nullopt}})[0];
}

bool t_defined(const Value& v, CallArgs& a) {
  return no_args("defined", a), !v.is_undefined();
}
bool t_undefined(const Value& v, CallArgs& a) {
  return no_args("undefined", a), v.is_undefined();
}
bool t_none(const Value& v, CallArgs& a) {
  return no_args("none", a), v.is_none();
}
bool t_string(const Value& v, CallArgs& a) {
  return no_args("string", a), v.is_string();
}
bool t_number(const Value& v, CallArgs& a) {
  return no_args("number", a), v.is_number();
}
bool t_integer(const Value& v, CallArgs& a) {
  return no_args("integer", a), v.is_int();
}
bool t_float(const Value& v, CallArgs& a) {
  return no_args("float", a), v.is_float();
}
bool t_mapping(const Value& v, CallArgs& a) {
  return no_args("mapping", a), v.is_dict();
}
bool t_boolean(const Value& v, CallArgs& a) {
  return no_args("boolean", a), v.is_bool();
}
bool t_true(const Value& v, CallArgs& a) {
  return no_args("true", a), v.is_bool() && v.as_bool();
}
bool t_false(const Value& v, CallArgs& a) {
  return no_args("false", a), v.is_bool() && !v.as_bool();
}
bool t_escaped(const Value& v, CallArgs& a) {
  return no_args("escaped", a), v.is_markup();
}

bool t_callable(const Value& v, CallArgs& a) {
  no_args("callable", a);
  return v.is_object() && v.obj().callable();
}

bool t_iterable(const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return is_iterable(v) || (v.is_object() && v.obj().type_name() == "LoopContext");
}

// Python: len() and __getitem__ both exist.
bool t_sequence(const Value& v, CallArgs& a) {
  no_args("sequence", a);
  if (v.is_undefined() || v.is_string() || v.is_dict()) return true;
  if (!v.is_seq()) return false;
  SeqKind k = v.seq().kind;
  return k == SeqKind::kList || k == SeqKind::kTuple || k == SeqKind::kRange;
}

bool remainder_is(const Value& v, const Value& divisor, std::int64_t expected) {
  return py_equal(binary_op(BinaryOp::kMod, v, divisor), Value::integer(expected));
}

bool t_even(const Value& v, CallArgs& a) {
  no_args("even", a);
  return remainder_is(v, Value::integer(2), 0);
}

bool t_odd(const Value& v, CallArgs& a) {
  no_args("odd", a);
  return remainder_is(v, Value::integer(2), 1);
}

bool t_divisibleby(const Value& v, CallArgs& a) {
  return remainder_is(v, one_arg("divisibleby", a, "num"), 0);
}

bool t_eq(const Value& v, CallArgs& a) {
  return py_equal(v, one_arg("eq", a, "other"));
}
bool t_ne(const Value& v, CallArgs& a) {
  return !py_equal(v, one_arg("ne", a, "other"));
}
bool t_lt(const Value& v, CallArgs& a) {
  return py_less(v, one_arg("lt", a, "other"), "<");
}
bool t_gt(const Value& v, CallArgs& a) {
  Value other = one_arg("gt", a, "other");
  py_less(v, other, ">");
  return py_less(other, v, ">");
}
bool t_le(const Value& v, CallArgs& a) {
  Value other = one_arg("le", a, "other");
  return py_less(v, other, "<=") || py_equal(v, other);
}
bool t_ge(const Value& v, CallArgs& a) {
  Value other = one_arg("ge", a, "other");
  py_less(v, other, ">=");
  return py_less(other, v, ">=") || py_equal(v, other);
}

bool t_in(const Value& v, CallArgs& a) {
  return contains(one_arg("in", a, "seq"), v);
}

bool t_lower(const Value& v, CallArgs& a) {
  no_args("lower", a);
  CallArgs none;
  return truthy(call_method(Value::string(to_str(v)), "islower", none));
}

bool t_upper(const Value& v, CallArgs& a) {
  no_args("upper", a);
  CallArgs none;
  return truthy(call_method(Value::string(to_str(v)), "isupper", none));
}

// Python `is`: singletons and small cached ints compare by value, containers by identity.
bool t_sameas(const Value& v, CallArgs& a) {
  Value other = one_arg("sameas", a, "other");
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case Value::Type::kNone:
    case Value::Type::kUndefined:
      return v.is_none() || v.same_object(other);
    case Value::Type::kBool:
      return v.as_bool() == other.as_bool();
    case Value::Type::kInt:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    default:
      return v.same_object(other);
  }
}

bool t_filter(const Value& v, CallArgs& a) {
  no_args("filter", a);
  return v.is_string() && is_known_filter(v.str());
}

bool t_test(const Value& v, CallArgs& a) {
  no_args("test", a);
  return v.is_string() && is_known_test(v.str());
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"even", t_even},
      {"odd", t_odd},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"lower", t_lower},
      {"upper", t_upper},
      {"callable", t_callable},
      {"sameas", t_sameas},
      {"escaped", t_escaped},
      {"filter", t_filter},
      {"test", t_test},
  };
  return table;
}

}  // namespace

bool is_known_test(std::string_view name) {
  return tests().count(name) > 0;
}

bool call_test(std::string_view name, const Value& operand, CallArgs& args, Interpreter&) {
  auto it = tests().find(name);
  if (it == tests().end()) value_fail("No test named '{}'.", name);
  return it->second(operand, args);
}

}  // namespace md::jinja
