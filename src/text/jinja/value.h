// The values a Jinja template computes with, modelled on the Python objects jinja2 sees:
// None, bool, int, float, str (and Markup), list/tuple and their iterator cousins, dict,
// Undefined, and a few objects (namespace, macro, loop, bound method).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/error.h"

namespace md::jinja {

class Value;
class Object;
class Interpreter;

// How a sequence behaves: lists and tuples are reusable and indexable; generators and reverse
// iterators are one-shot and have no len(); dict views and ranges print differently.
enum class SeqKind : std::uint8_t {
  kList,
  kTuple,
  kGenerator,
  kReverseIterator,
  kDictKeys,
  kDictValues,
  kDictItems,
  kRange,
};

struct Sequence {
  SeqKind kind = SeqKind::kList;
  std::vector<Value> items;
  // One-shot iterators remember how far they were consumed (jinja2 shares the Python iterator).
  mutable std::size_t cursor = 0;
  // range(start, stop, step) as Python prints it.
  std::int64_t range_start = 0, range_stop = 0, range_step = 1;
  // Nesting depth of lists/dicts inside (objects count as leaves).
  int depth = 1;

  bool one_shot() const { return kind == SeqKind::kGenerator || kind == SeqKind::kReverseIterator; }
};

// Insertion-ordered mapping (Python dicts keep insertion order; tojson relies on it).
class Dict {
 public:
  Dict() = default;
  // Later duplicates replace the value but keep the first key's position, as in Python.
  void set(Value key, Value value);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  // Defined after Value: std::pair<Value, Value> needs the complete type (Clang checks it here).
  std::size_t size() const;
  void clear();
  int depth() const { return depth_; }
  // Computes depth() from the entries; throws when nesting exceeds the safety limit.
  void seal();

 private:
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

class Value {
 public:
  enum class Type : std::uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kSeq,
    kDict,
    kObject,
  };

  // A plain undefined value (an unknown name); `hint` is the message used if it is misused.
  Value() : type_(Type::kUndefined) {}
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value sequence(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value range(std::int64_t start, std::int64_t stop, std::int64_t step);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> obj);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_seq() const { return type_ == Type::kSeq; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_object() const { return type_ == Type::kObject; }
  // int or bool: Python's bool is an int subclass and takes part in integer arithmetic.
  bool is_integral() const { return type_ == Type::kInt || type_ == Type::kBool; }
  bool is_number() const { return is_integral() || type_ == Type::kFloat; }
  bool is_markup() const { return markup_; }
  bool is_list_or_tuple() const {
    return is_seq() && (seq().kind == SeqKind::kList || seq().kind == SeqKind::kTuple);
  }

  bool as_bool() const { return b_; }
  // int and bool as int64.
  std::int64_t as_int() const { return type_ == Type::kBool ? (b_ ? 1 : 0) : i_; }
  // Any number as double.
  double as_double() const { return type_ == Type::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const Sequence& seq() const { return *static_cast<const Sequence*>(ptr_.get()); }
  const Dict& dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  Object& obj() const { return *static_cast<Object*>(ptr_.get()); }
  std::shared_ptr<Object> obj_ptr() const { return std::static_pointer_cast<Object>(ptr_); }
  // The message an undefined value reports when it is used.
  std::string undefined_hint() const;
  // Same underlying object (Python `is` for containers and objects).
  bool same_object(const Value& other) const { return ptr_ && ptr_ == other.ptr_; }

 private:
  Type type_;
  bool markup_ = false;
  union {
    bool b_;
    std::int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

// Objects other than plain data. Methods receive the interpreter so macros can render.
class Object {
 public:
  virtual ~Object() = default;
  // Python type name used in messages ("Namespace", "Macro", "LoopContext", ...).
  virtual std::string type_name() const = 0;
  virtual std::string repr() const = 0;
  // Attribute lookup; a missing attribute yields an undefined value, never an exception.
  virtual Value getattr(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args);
  // Only namespaces accept `{% set ns.attr = value %}`.
  virtual bool set_attr(const std::string& name, Value value);
};

// --- Python semantics over values (value.cpp) -------------------------------------------------

// Python type() name: "str", "int", "list", "dict", "NoneType", "Undefined", ...
std::string type_name(const Value& v);
// The "'dict object'" form jinja2 uses in undefined-attribute messages.
std::string object_type_repr(const Value& v);
bool truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
// Python a < b; throws ValueError for unorderable types ("'<' not supported ...").
bool py_less(const Value& a, const Value& b, std::string_view op = "<");
// len(); nullopt when the value has no length (generators, numbers, ...).
std::optional<std::size_t> py_len(const Value& v);
// iter(): the remaining items (consumes one-shot iterators). Throws for non-iterables.
std::vector<Value> iterate(const Value& v);
bool is_iterable(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);
// Throws unless the value can be a dict key (Python hashable).
void require_hashable(const Value& v);
inline std::size_t Dict::size() const {
  return entries_.size();
}
inline void Dict::clear() {
  entries_.clear();
}

// Containers nested deeper than this are refused: deep values would overflow the stack when
// compared, printed or destroyed.
inline constexpr int kMaxValueNesting = 250;
// Nesting depth of a value (0 for scalars and objects).
int nesting_depth(const Value& v);

// Throws the jinja2 UndefinedError for a misused undefined value.
[[noreturn]] void fail_undefined(const Value& v);

// --- Python str() and repr() (repr.cpp) --------------------------------------------------------

std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string repr_string(std::string_view s);
// Python repr(float): shortest round-trip digits, 1e+16 style exponents, "inf"/"nan".
std::string format_float(double f);
// HTML escaping as markupsafe.escape does it.
std::string html_escape(std::string_view s);

}  // namespace md::jinja
