// Entry points of the built-in library shared by the interpreter: Python-style argument binding,
// filters, tests, methods of str/dict/list, operators and sandboxed attribute access.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace md::jinja {

class Interpreter;

// --- argument binding (ops.cpp) -----------------------------------------------------------------

struct Param {
  std::string_view name;
  std::optional<Value> default_value;  // nullopt: required
};

// Binds positional and keyword arguments like a Python signature `def func(params...)`; returns
// one value per parameter. Throws ValueError with Python's TypeError wording.
std::vector<Value> bind_args(std::string_view func, const CallArgs& args,
                             std::initializer_list<Param> params);

// --- size limit for values built by the library ----------------------------------------------

// Throws when a string or list of `size` units would exceed the render's size limit; checked
// before allocating so that 'a' * 10**12 fails cleanly.
void check_size(std::size_t size);
// Sets the limit for the current thread while a render runs.
class ScopedSizeLimit {
 public:
  explicit ScopedSizeLimit(std::size_t limit);
  ~ScopedSizeLimit();
  ScopedSizeLimit(const ScopedSizeLimit&) = delete;
  ScopedSizeLimit& operator=(const ScopedSizeLimit&) = delete;

 private:
  std::size_t previous_;
};

// --- operators and access (ops.cpp) ----------------------------------------------------------

Value binary_op(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value positive(const Value& v);
// Sandboxed `obj.name` (jinja2's SandboxedEnvironment.getattr).
Value get_attribute(const Value& obj, std::string_view name);
// Sandboxed `obj[key]`.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; null values mean "omitted".
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python integer value of an int/bool, or nullopt.
std::optional<std::int64_t> as_index(const Value& v);

// --- methods (methods.cpp) ------------------------------------------------------------------

enum class MethodKind { kNone, kSafe, kUnsafe };
// Whether `receiver.name` is a Python method, and whether the immutable sandbox allows it.
MethodKind method_kind(const Value& receiver, std::string_view name);
Value call_method(const Value& receiver, std::string_view name, CallArgs& args);
// Python str % args and str.format (used by the `%` operator, `format` filter and method).
// `escape`: the format string is Markup, so inserted values are HTML-escaped (markupsafe).
std::string percent_format(const std::string& format, const Value& args, bool escape = false);
std::string brace_format(const std::string& format, const CallArgs& args, bool escape = false);

// --- filters and tests (filters.cpp, tests.cpp) ---------------------------------------------

Value call_filter(std::string_view name, Value operand, CallArgs& args, Interpreter& interp);
bool call_test(std::string_view name, const Value& operand, CallArgs& args, Interpreter& interp);

}  // namespace md::jinja
