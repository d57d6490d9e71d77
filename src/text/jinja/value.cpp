#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "text/jinja/unicode.h"

namespace md::jinja {

// --- construction ------------------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(std::int64_t i) {
  Value v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.type_ = Type::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.type_ = Type::kString;
  v.markup_ = markup;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::sequence(std::vector<Value> items, SeqKind kind) {
  auto seq = std::make_shared<Sequence>();
  seq->kind = kind;
  seq->items = std::move(items);
  for (const Value& item : seq->items) seq->depth = std::max(seq->depth, nesting_depth(item) + 1);
  if (seq->depth > kMaxValueNesting) {
    throw ValueError("values nested too deeply", TemplateError::Kind::kLimit);
  }
  Value v;
  v.type_ = Type::kSeq;
  v.ptr_ = std::move(seq);
  return v;
}

Value Value::range(std::int64_t start, std::int64_t stop, std::int64_t step) {
  std::vector<Value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    items.push_back(integer(i));
  }
  Value v = sequence(std::move(items), SeqKind::kRange);
  auto& seq = *static_cast<Sequence*>(v.ptr_.get());
  seq.range_start = start;
  seq.range_stop = stop;
  seq.range_step = step;
  return v;
}

Value Value::dict(Dict d) {
  d.seal();
  Value v;
  v.type_ = Type::kDict;
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> obj) {
  Value v;
  v.type_ = Type::kObject;
  v.ptr_ = std::move(obj);
  return v;
}

std::string Value::undefined_hint() const {
  if (type_ != Type::kUndefined || !ptr_) return "value is undefined";
  return *static_cast<const std::string*>(ptr_.get());
}

// --- Dict --------------------------------------------------------------------------------------

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries_) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

void Dict::seal() {
  depth_ = 1;
  for (const auto& [k, v] : entries_) {
    depth_ = std::max({depth_, nesting_depth(k) + 1, nesting_depth(v) + 1});
  }
  if (depth_ > kMaxValueNesting) {
    throw ValueError("values nested too deeply", TemplateError::Kind::kLimit);
  }
}

int nesting_depth(const Value& v) {
  if (v.is_seq()) return v.seq().depth;
  if (v.is_dict()) return v.dict().depth();
  return 0;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries_) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

// --- Object defaults ---------------------------------------------------------------------------

Value Object::getattr(std::string_view name) const {
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(), name));
}

Value Object::call(Interpreter&, CallArgs&) {
  value_fail("'{}' object is not callable", type_name());
}

bool Object::set_attr(const std::string&, Value) {
  return false;
}

// --- Python semantics --------------------------------------------------------------------------

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return v.is_markup() ? "Markup" : "str";
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kObject:
      return v.obj().type_name();
    case Value::Type::kSeq:
      switch (v.seq().kind) {
        case SeqKind::kList:
          return "list";
        case SeqKind::kTuple:
          return "tuple";
        case SeqKind::kGenerator:
          return "generator";
        case SeqKind::kReverseIterator:
          return "list_reverseiterator";
        case SeqKind::kDictKeys:
          return "dict_keys";
        case SeqKind::kDictValues:
          return "dict_values";
        case SeqKind::kDictItems:
          return "dict_items";
        case SeqKind::kRange:
          return "range";
      }
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

[[noreturn]] void fail_undefined(const Value& v) {
  throw ValueError(v.undefined_hint());
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
      return v.as_bool();
    case Value::Type::kInt:
      return v.as_int() != 0;
    case Value::Type::kFloat:
      return v.as_double() != 0.0;
    case Value::Type::kString:
      return !v.str().empty();
    case Value::Type::kSeq:
      return v.seq().one_shot() || v.seq().items.size() > v.seq().cursor;
    case Value::Type::kDict:
      return v.dict().size() > 0;
    case Value::Type::kObject:
      return true;
  }
  return false;
}

namespace {

// Exact comparison of an int with a float, as Python does (no rounding of large ints).
int compare_int_float(std::int64_t i, double f) {
  if (std::isnan(f)) return 2;  // unordered
  if (f >= 9.3e18) return -1;
  if (f <= -9.3e18) return 1;
  double fl = std::floor(f);
  auto fi = static_cast<std::int64_t>(fl);
  if (i < fi) return -1;
  if (i > fi) return 1;
  return fl == f ? 0 : -1;
}

// -1, 0, 1 for numbers; 2 when unordered (NaN).
int compare_numbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_integral()) return compare_int_float(a.as_int(), b.as_double());
  if (b.is_integral()) {
    int c = compare_int_float(b.as_int(), a.as_double());
    return c == 2 ? 2 : -c;
  }
  double x = a.as_double(), y = b.as_double();
  if (std::isnan(x) || std::isnan(y)) return 2;
  return x < y ? -1 : x > y ? 1 : 0;
}

const std::vector<Value>& items_of(const Value& v) {
  return v.seq().items;
}

bool sequences_equal(const Value& a, const Value& b) {
  const auto& x = items_of(a);
  const auto& y = items_of(b);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!x[i].same_object(y[i]) && !py_equal(x[i], y[i])) return false;
  }
  return true;
}

bool dicts_equal(const Dict& a, const Dict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a.entries()) {
    const Value* other = b.find(k);
    if (!other || !py_equal(v, *other)) return false;
  }
  return true;
}

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.str() == b.str();
    case Value::Type::kDict:
      return dicts_equal(a.dict(), b.dict());
    case Value::Type::kObject:
      return a.same_object(b);
    case Value::Type::kSeq: {
      SeqKind ka = a.seq().kind, kb = b.seq().kind;
      if (a.seq().one_shot() || b.seq().one_shot()) return a.same_object(b);
      if (ka != kb) return false;
      if (ka == SeqKind::kDictValues) return a.same_object(b);
      return sequences_equal(a, b);
    }
    default:
      return false;
  }
}

bool py_less(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == -1;
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  bool same_seq = a.is_seq() && b.is_seq() && a.seq().kind == b.seq().kind &&
                  (a.seq().kind == SeqKind::kList || a.seq().kind == SeqKind::kTuple);
  if (same_seq) {
    const auto& x = items_of(a);
    const auto& y = items_of(b);
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  value_fail("'{}' not supported between instances of '{}' and '{}'", op, type_name(a),
             type_name(b));
}

std::optional<std::size_t> py_len(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return uni::length(v.str());
    case Value::Type::kDict:
      return v.dict().size();
    case Value::Type::kSeq:
      if (v.seq().one_shot()) return std::nullopt;
      return v.seq().items.size();
    default:
      return std::nullopt;
  }
}

bool is_iterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_seq() || v.is_dict();
}

std::vector<Value> iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return {};
    case Value::Type::kString: {
      std::vector<Value> out;
      const std::string& s = v.str();
      for (std::size_t pos = 0; pos < s.size();) {
        std::size_t start = pos;
        uni::next(s, pos);
        out.push_back(Value::string(s.substr(start, pos - start)));
      }
      return out;
    }
    case Value::Type::kDict: {
      std::vector<Value> out;
      out.reserve(v.dict().size());
      for (const auto& entry : v.dict().entries()) out.push_back(entry.first);
      return out;
    }
    case Value::Type::kSeq: {
      const Sequence& seq = v.seq();
      if (!seq.one_shot()) return seq.items;
      std::vector<Value> out(seq.items.begin() + static_cast<std::ptrdiff_t>(seq.cursor),
                             seq.items.end());
      seq.cursor = seq.items.size();
      return out;
    }
    default:
      value_fail("'{}' object is not iterable", type_name(v));
  }
}

void require_hashable(const Value& v) {
  if (v.is_dict() || (v.is_seq() && v.seq().kind == SeqKind::kList)) {
    value_fail("unhashable type: '{}'", type_name(v));
  }
  if (v.is_seq() && v.seq().kind == SeqKind::kTuple) {
    for (const Value& item : v.seq().items) require_hashable(item);
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        value_fail("'in <string>' requires string as left operand, not {}", type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Type::kDict:
      require_hashable(item);
      return container.dict().find(item) != nullptr;
    case Value::Type::kSeq: {
      const Sequence& seq = container.seq();
      for (std::size_t i = seq.one_shot() ? seq.cursor : 0; i < seq.items.size(); ++i) {
        if (py_equal(seq.items[i], item)) {
          if (seq.one_shot()) seq.cursor = i + 1;
          return true;
        }
      }
      if (seq.one_shot()) seq.cursor = seq.items.size();
      return false;
    }
    default:
      value_fail("argument of type '{}' is not iterable", type_name(container));
  }
}

}  // namespace md::jinja
