// Filters over whole sequences: map, select/reject(attr), sort, dictsort, unique, min/max, sum,
// batch. Like jinja2's, the lazy ones return one-shot generators.
#include <algorithm>
#include <charconv>

#include "text/jinja/filters_impl.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/unicode.h"

namespace md::jinja::filters {

namespace {
const Value kNone = Value::none();
}  // namespace

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(uni::lower(v.str()), v.is_markup()) : v;
}

// jinja2's make_attrgetter: "a.b.0" walks items with getitem; digit parts become indices.
std::vector<Value> attribute_parts(const Value& attribute) {
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  const std::string& s = attribute.str();
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    std::int64_t index = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    bool digits =
        !part.empty() && ec == std::errc() && ptr == part.data() + part.size() &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    parts.push_back(digits ? Value::integer(index) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

Value get_path(Value item, const std::vector<Value>& parts, const Value* dflt) {
  for (const Value& part : parts) {
    item = get_item(item, part);
    if (dflt && item.is_undefined()) item = *dflt;
  }
  return item;
}

Value f_batch(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("batch", args, {{"linecount", std::nullopt}, {"fill_with", kNone}});
  auto n = as_index(a[0]);
  if (!n || *n <= 0) throw ValueError("batch linecount must be a positive integer");
  std::vector<Value> out, tmp;
  for (Value& item : iterate(v)) {
    if (static_cast<std::int64_t>(tmp.size()) == *n) {
      out.push_back(Value::sequence(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (!a[1].is_none()) {
      while (static_cast<std::int64_t>(tmp.size()) < *n) tmp.push_back(a[1]);
    }
    out.push_back(Value::sequence(std::move(tmp)));
  }
  return generator(std::move(out));
}

static Value sort_key(const Value& item, const std::vector<std::vector<Value>>& getters,
                      bool fold) {
  if (getters.empty()) return fold ? ignore_case(item) : item;
  std::vector<Value> keys;
  for (const auto& parts : getters) {
    Value k = get_path(item, parts);
    keys.push_back(fold ? ignore_case(k) : k);
  }
  return keys.size() == 1 ? keys[0] : Value::sequence(std::move(keys));
}

// Python's sorted(values, key=..., reverse=...): stable in both directions.
static std::vector<Value> sorted_by(std::vector<Value> values, const std::vector<Value>& keys,
                                    bool reverse) {
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return reverse ? py_less(keys[y], keys[x]) : py_less(keys[x], keys[y]);
  });
  std::vector<Value> out;
  out.reserve(values.size());
  for (std::size_t i : order) out.push_back(std::move(values[i]));
  return out;
}

Value f_dictsort(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("dictsort", args,
                     {{"case_sensitive", Value::boolean(false)},
                      {"by", Value::string("key")},
                      {"reverse", Value::boolean(false)}});
  if (!v.is_dict()) throw ValueError("You can only sort by either \"key\" or \"value\"");
  std::size_t pos;
  if (a[1].is_string() && a[1].str() == "key") {
    pos = 0;
  } else if (a[1].is_string() && a[1].str() == "value") {
    pos = 1;
  } else {
    throw ValueError("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.dict().entries()) {
    items.push_back(Value::sequence({k, val}, SeqKind::kTuple));
    const Value& key = pos == 0 ? k : val;
    keys.push_back(truthy(a[0]) ? key : ignore_case(key));
  }
  return Value::sequence(sorted_by(std::move(items), keys, truthy(a[2])));
}

Value f_map(Value& v, CallArgs& args, Interpreter& interp) {
  std::vector<Value> out;
  if (args.args.empty()) {
    const Value* attribute = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, val] : args.kwargs) {
      if (k == "attribute") {
        attribute = &val;
      } else if (k == "default") {
        dflt = &val;
      } else {
        value_fail("Unexpected keyword argument '{}'", k);
      }
    }
    if (!attribute) throw ValueError("map requires a filter argument");
    std::vector<Value> parts = attribute_parts(*attribute);
    const Value* use_default = dflt && !dflt->is_none() ? dflt : nullptr;
    for (const Value& item : iterate(v)) {
      interp.step();
      out.push_back(get_path(item, parts, use_default));
    }
    return generator(std::move(out));
  }
  if (!args.args[0].is_string()) throw ValueError("map filter name must be a string");
  std::string name = args.args[0].str();
  if (!is_known_filter(name)) value_fail("No filter named '{}'.", name);
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : iterate(v)) {
    interp.step();
    CallArgs copy = rest;
    out.push_back(interp.apply_filter(name, item, copy));
  }
  return generator(std::move(out));
}

static Value min_max(Value& v, CallArgs& args, bool want_max) {
  auto a = bind_args(want_max ? "max" : "min", args,
                     {{"case_sensitive", Value::boolean(false)}, {"attribute", kNone}});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<std::vector<Value>> getters;
  if (!a[1].is_none()) getters.push_back(attribute_parts(a[1]));
  bool fold = !truthy(a[0]);
  std::size_t best = 0;
  Value best_key = sort_key(items[0], getters, fold);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], getters, fold);
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value f_max(Value& v, CallArgs& args, Interpreter&) {
  return min_max(v, args, true);
}
Value f_min(Value& v, CallArgs& args, Interpreter&) {
  return min_max(v, args, false);
}

static Value select_reject(Value& v, CallArgs& args, Interpreter& interp, bool select,
                           bool by_attr) {
  std::vector<Value> out;
  if (!truthy(v)) return generator({});
  std::size_t off = 0;
  std::vector<Value> parts;
  if (by_attr) {
    if (args.args.empty()) throw ValueError("Missing parameter for attribute name");
    parts = attribute_parts(args.args[0]);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.args.size() > off) {
    if (!args.args[off].is_string()) throw ValueError("test name must be a string");
    test = args.args[off].str();
    if (!is_known_test(*test)) value_fail("No test named '{}'.", *test);
    test_args.args.assign(args.args.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                          args.args.end());
    test_args.kwargs = args.kwargs;
  }
  for (const Value& item : iterate(v)) {
    interp.step();
    Value subject = by_attr ? get_path(item, parts) : item;
    CallArgs copy = test_args;
    bool ok = test ? interp.apply_test(*test, subject, copy) : truthy(subject);
    if (ok == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value f_select(Value& v, CallArgs& a, Interpreter& i) {
  return select_reject(v, a, i, true, false);
}
Value f_reject(Value& v, CallArgs& a, Interpreter& i) {
  return select_reject(v, a, i, false, false);
}
Value f_selectattr(Value& v, CallArgs& a, Interpreter& i) {
  return select_reject(v, a, i, true, true);
}
Value f_rejectattr(Value& v, CallArgs& a, Interpreter& i) {
  return select_reject(v, a, i, false, true);
}

Value f_sort(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("sort", args,
                     {{"reverse", Value::boolean(false)},
                      {"case_sensitive", Value::boolean(false)},
                      {"attribute", kNone}});
  std::vector<Value> items = iterate(v);
  std::vector<std::vector<Value>> getters;
  if (a[2].is_string()) {
    std::string spec = a[2].str();
    std::size_t start = 0;
    while (true) {
      std::size_t comma = spec.find(',', start);
      getters.push_back(attribute_parts(Value::string(spec.substr(start, comma - start))));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (!a[2].is_none()) {
    getters.push_back({a[2]});
  }
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(sort_key(item, getters, !truthy(a[1])));
  return Value::sequence(sorted_by(std::move(items), keys, truthy(a[0])));
}

Value f_sum(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("sum", args, {{"attribute", kNone}, {"start", Value::integer(0)}});
  if (a[1].is_string()) throw ValueError("sum() can't sum strings [use ''.join(seq) instead]");
  std::vector<Value> parts = a[0].is_none() ? std::vector<Value>{} : attribute_parts(a[0]);
  Value total = a[1];
  for (const Value& item : iterate(v)) {
    total = binary_op(BinaryOp::kAdd, total, a[0].is_none() ? item : get_path(item, parts));
  }
  return total;
}

Value f_unique(Value& v, CallArgs& args, Interpreter&) {
  auto a =
      bind_args("unique", args, {{"case_sensitive", Value::boolean(false)}, {"attribute", kNone}});
  std::vector<std::vector<Value>> getters;
  if (!a[1].is_none()) getters.push_back(attribute_parts(a[1]));
  std::vector<Value> seen, out;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, getters, !truthy(a[0]));
    require_hashable(key);
    bool dup =
        std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); });
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return generator(std::move(out));
}

}  // namespace md::jinja::filters
