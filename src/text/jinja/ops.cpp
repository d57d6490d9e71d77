// Python operators over template values and jinja2's sandboxed attribute/item access.
#include <cmath>
#include <limits>

#include "text/jinja/builtins.h"
#include "text/jinja/objects.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

// --- argument binding ----------------------------------------------------------------------------

std::vector<Value> bind_args(std::string_view func, const CallArgs& args,
                             std::initializer_list<Param> params) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.args.size() > params.size()) {
    value_fail("{}() takes at most {} argument(s) ({} given)", func, params.size(),
               args.args.size());
  }
  for (std::size_t i = 0; i < args.args.size(); ++i) bound[i] = args.args[i];
  for (const auto& [key, value] : args.kwargs) {
    std::size_t i = 0;
    for (const Param& p : params) {
      if (p.name == key) break;
      ++i;
    }
    if (i == params.size()) value_fail("{}() got an unexpected keyword argument '{}'", func, key);
    if (bound[i]) value_fail("{}() got multiple values for argument '{}'", func, key);
    bound[i] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  std::size_t i = 0;
  for (const Param& p : params) {
    if (bound[i]) {
      out.push_back(std::move(*bound[i]));
    } else if (p.default_value) {
      out.push_back(*p.default_value);
    } else {
      value_fail("{}() missing required argument '{}'", func, p.name);
    }
    ++i;
  }
  return out;
}

// --- size limit ----------------------------------------------------------------------------------

namespace {
thread_local std::size_t g_size_limit = 64u << 20;
}

void check_size(std::size_t size) {
  if (size > g_size_limit) {
    throw ValueError(fmt::format("value too large ({} > {} limit)", size, g_size_limit),
                     TemplateError::Kind::kLimit);
  }
}

ScopedSizeLimit::ScopedSizeLimit(std::size_t limit) : previous_(g_size_limit) {
  g_size_limit = limit;
}
ScopedSizeLimit::~ScopedSizeLimit() {
  g_size_limit = previous_;
}

// --- arithmetic ----------------------------------------------------------------------------------

namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  value_fail("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op), type_name(a),
             type_name(b));
}

[[noreturn]] void overflow() {
  throw ValueError("integer result does not fit in 64 bits (unsupported big integer)");
}

Value int_result(bool overflowed, std::int64_t r) {
  if (overflowed) overflow();
  return Value::integer(r);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (b == -1 && a == std::numeric_limits<std::int64_t>::min()) overflow();
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  if (b == -1) return 0;
  std::int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// CPython's float_divmod: Python's float // and % (sign of the divisor, floor rounding).
std::pair<double, double> float_divmod(double vx, double wx) {
  if (wx == 0.0) throw ValueError("float divmod()");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

Value power(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    std::int64_t base = a.as_int(), exp = b.as_int(), result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return Value::integer(result);
  }
  double x = a.as_double(), y = b.as_double();
  if (x == 0.0 && y < 0) throw ValueError("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) {
    throw ValueError("complex results of ** are not supported");
  }
  return Value::number(std::pow(x, y));
}

Value repeat(const Value& seq, std::int64_t n) {
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (n <= 0 || s.empty()) return Value::string("", seq.is_markup());
    check_size(s.size() * static_cast<std::size_t>(std::min<std::int64_t>(n, 1LL << 40)));
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out), seq.is_markup());
  }
  const auto& items = seq.seq().items;
  std::vector<Value> out;
  if (n > 0 && !items.empty()) {
    check_size(items.size() * static_cast<std::size_t>(std::min<std::int64_t>(n, 1LL << 40)));
    for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  }
  return Value::sequence(std::move(out), seq.seq().kind);
}

Value add(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    std::int64_t r = 0;
    bool overflowed = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
    return int_result(overflowed, r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_double() + b.as_double());
  if (a.is_string() && b.is_string()) {
    // markupsafe: adding plain text to Markup escapes the plain text.
    bool markup = a.is_markup() || b.is_markup();
    std::string left = markup && !a.is_markup() ? html_escape(a.str()) : a.str();
    std::string right = markup && !b.is_markup() ? html_escape(b.str()) : b.str();
    check_size(left.size() + right.size());
    return Value::string(left + right, markup);
  }
  if (a.is_string()) {
    value_fail("can only concatenate str (not \"{}\") to str", type_name(b));
  }
  if (a.is_seq() && b.is_seq() && a.is_list_or_tuple() && a.seq().kind == b.seq().kind) {
    std::vector<Value> items = a.seq().items;
    check_size(items.size() + b.seq().items.size());
    items.insert(items.end(), b.seq().items.begin(), b.seq().items.end());
    return Value::sequence(std::move(items), a.seq().kind);
  }
  if (a.is_list_or_tuple()) {
    value_fail("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b),
               type_name(a));
  }
  unsupported(BinaryOp::kAdd, a, b);
}

Value multiply(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    std::int64_t r = 0;
    bool overflowed = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
    return int_result(overflowed, r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_double() * b.as_double());
  auto repeatable = [](const Value& v) { return v.is_string() || v.is_list_or_tuple(); };
  if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int());
  if (a.is_integral() && repeatable(b)) return repeat(b, a.as_int());
  if (repeatable(a) || repeatable(b)) {
    value_fail("can't multiply sequence by non-int of type '{}'", type_name(repeatable(a) ? b : a));
  }
  unsupported(BinaryOp::kMul, a, b);
}

Value divide(BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  bool ints = a.is_integral() && b.is_integral();
  if (op == BinaryOp::kDiv) {
    if (b.as_double() == 0.0) {
      throw ValueError(ints ? "division by zero" : "float division by zero");
    }
    return Value::number(a.as_double() / b.as_double());
  }
  if (ints) {
    if (b.as_int() == 0) throw ValueError("integer division or modulo by zero");
    return Value::integer(op == BinaryOp::kFloorDiv ? floor_div(a.as_int(), b.as_int())
                                                    : floor_mod(a.as_int(), b.as_int()));
  }
  if (b.as_double() == 0.0) {
    throw ValueError(op == BinaryOp::kMod ? "float modulo" : "float floor division by zero");
  }
  auto [div, mod] = float_divmod(a.as_double(), b.as_double());
  return Value::number(op == BinaryOp::kFloorDiv ? div : mod);
}

}  // namespace

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  switch (op) {
    case BinaryOp::kAdd:
      return add(a, b);
    case BinaryOp::kSub:
      if (a.is_integral() && b.is_integral()) {
        std::int64_t r = 0;
        bool overflowed = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
        return int_result(overflowed, r);
      }
      if (a.is_number() && b.is_number()) return Value::number(a.as_double() - b.as_double());
      unsupported(op, a, b);
    case BinaryOp::kMul:
      return multiply(a, b);
    case BinaryOp::kMod:
      if (a.is_string()) {
        std::string s = percent_format(a.str(), b, a.is_markup());
        return Value::string(std::move(s), a.is_markup());
      }
      return divide(op, a, b);
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
      return divide(op, a, b);
    case BinaryOp::kPow:
      if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
      return power(a, b);
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<std::int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::number(-v.as_double());
  value_fail("bad operand type for unary -: '{}'", type_name(v));
}

Value positive(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) return v;
  value_fail("bad operand type for unary +: '{}'", type_name(v));
}

// --- sandboxed access ----------------------------------------------------------------------------

std::optional<std::int64_t> as_index(const Value& v) {
  if (v.is_integral()) return v.as_int();
  return std::nullopt;
}

namespace {

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value missing_element(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), repr(key)));
}

Value unsafe_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)));
}

// A method found by attribute lookup: bound to its receiver, or refused by the sandbox.
std::optional<Value> method_attribute(const Value& obj, std::string_view name) {
  if (name.size() >= 2 && name.substr(0, 2) == "__") return unsafe_attribute(obj, name);
  switch (method_kind(obj, name)) {
    case MethodKind::kNone:
      return std::nullopt;
    case MethodKind::kUnsafe:
      return unsafe_attribute(obj, name);
    case MethodKind::kSafe:
      break;
  }
  std::string method(name);
  return Value::object(std::make_shared<NativeFunction>(
      method,
      [obj, method](Interpreter&, CallArgs& args) { return call_method(obj, method, args); }));
}

// Python indexing of a str by code point.
Value string_index(const Value& s, std::int64_t index) {
  const std::string& text = s.str();
  if (uni::is_ascii(text)) {
    auto n = static_cast<std::int64_t>(text.size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return missing_element(s, Value::integer(index));
    return Value::string(text.substr(static_cast<std::size_t>(index), 1), s.is_markup());
  }
  std::u32string cps = uni::decode(text);
  auto n = static_cast<std::int64_t>(cps.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) return missing_element(s, Value::integer(index));
  std::string out;
  uni::append(out, cps[static_cast<std::size_t>(index)]);
  return Value::string(std::move(out), s.is_markup());
}

}  // namespace

Value get_attribute(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      fail_undefined(obj);
    case Value::Type::kObject:
      return obj.obj().getattr(name);
    case Value::Type::kDict: {
      if (auto m = method_attribute(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return missing_attribute(obj, name);
    }
    default:
      if (auto m = method_attribute(obj, name)) return *m;
      return missing_attribute(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      fail_undefined(obj);
    case Value::Type::kDict: {
      bool hashable = !(key.is_dict() || (key.is_seq() && !key.is_list_or_tuple()) ||
                        (key.is_seq() && key.seq().kind == SeqKind::kList));
      if (hashable) {
        if (const Value* v = obj.dict().find(key)) return *v;
      }
      break;
    }
    case Value::Type::kSeq: {
      const Sequence& seq = obj.seq();
      bool indexable =
          seq.kind == SeqKind::kList || seq.kind == SeqKind::kTuple || seq.kind == SeqKind::kRange;
      if (auto index = as_index(key); index && indexable) {
        auto n = static_cast<std::int64_t>(seq.items.size());
        std::int64_t i = *index < 0 ? *index + n : *index;
        if (i >= 0 && i < n) return seq.items[static_cast<std::size_t>(i)];
        return missing_element(obj, key);
      }
      break;
    }
    case Value::Type::kString:
      if (auto index = as_index(key)) return string_index(obj, *index);
      break;
    default:
      break;
  }
  // jinja2 falls back to attribute lookup for string keys (so d['items'] finds the method).
  if (key.is_string()) {
    if (obj.is_object()) return obj.obj().getattr(key.str());
    if (auto m = method_attribute(obj, key.str())) return *m;
  }
  return missing_element(obj, key);
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto bound = [](const Value& v) -> std::optional<std::optional<std::int64_t>> {
    if (v.is_none()) return std::optional<std::int64_t>();
    if (auto i = as_index(v)) return std::optional<std::int64_t>(*i);
    return std::nullopt;  // not a valid slice index
  };
  auto start_b = bound(start_v), stop_b = bound(stop_v), step_b = bound(step_v);
  bool sliceable = obj.is_string() ||
                   (obj.is_seq() && (obj.is_list_or_tuple() || obj.seq().kind == SeqKind::kRange));
  // Python raises TypeError for bad indices or unsliceable objects; the sandbox turns it into
  // an undefined value.
  if (!start_b || !stop_b || !step_b || !sliceable) {
    return Value::undefined(fmt::format("{} has no element slice", object_type_repr(obj)));
  }
  std::int64_t step = step_b->value_or(1);
  if (step == 0) throw ValueError("slice step cannot be zero");
  std::u32string cps;
  bool ascii = obj.is_string() && uni::is_ascii(obj.str());
  if (obj.is_string() && !ascii) cps = uni::decode(obj.str());
  auto len = static_cast<std::int64_t>(obj.is_string() ? (ascii ? obj.str().size() : cps.size())
                                                       : obj.seq().items.size());
  std::int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
  auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    std::int64_t x = *v < 0 ? *v + len : *v;
    return x < lower ? lower : x > upper ? upper : x;
  };
  std::int64_t start = clamp(*start_b, step > 0 ? lower : upper);
  std::int64_t stop = clamp(*stop_b, step > 0 ? upper : lower);
  std::vector<std::size_t> picks;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    picks.push_back(static_cast<std::size_t>(i));
  }
  if (obj.is_string()) {
    std::string out;
    for (std::size_t i : picks) {
      if (ascii) {
        out.push_back(obj.str()[i]);
      } else {
        uni::append(out, cps[i]);
      }
    }
    return Value::string(std::move(out), obj.is_markup());
  }
  const Sequence& seq = obj.seq();
  if (seq.kind == SeqKind::kRange) {
    std::int64_t new_step = seq.range_step * step;
    return Value::range(seq.range_start + start * seq.range_step,
                        seq.range_start + stop * seq.range_step, new_step);
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (std::size_t i : picks) out.push_back(seq.items[i]);
  return Value::sequence(std::move(out), seq.kind);
}

}  // namespace md::jinja
