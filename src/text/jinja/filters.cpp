// The filters (value | name(args)) with jinja2 3.1 semantics, plus transformers' tojson.
// Filters that return generators in jinja2 (map, select, unique, ...) return one-shot sequences
// here too, so that reuse, len() and printing behave the same way.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

#include "text/jinja/builtins.h"
#include "text/jinja/filters_impl.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/json.h"
#include "text/jinja/numbers.h"
#include "text/jinja/parser.h"
#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

using filters::attribute_parts;
using filters::f_batch;
using filters::f_dictsort;
using filters::f_map;
using filters::f_max;
using filters::f_min;
using filters::f_reject;
using filters::f_rejectattr;
using filters::f_select;
using filters::f_selectattr;
using filters::f_sort;
using filters::f_sum;
using filters::f_unique;
using filters::generator;
using filters::get_path;
using filters::soft_str;
using FilterFn = Value (*)(Value& v, CallArgs& args, Interpreter& interp);

const Value kNone = Value::none();

// --- filters -------------------------------------------------------------------------------------

Value f_abs(Value& v, CallArgs& args, Interpreter&) {
  bind_args("abs", args, {});
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<std::int64_t>::min())
      throw ValueError("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  value_fail("bad operand type for abs(): '{}'", type_name(v));
}

Value f_attr(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("attr", args, {{"name", std::nullopt}});
  if (!a[0].is_string()) value_fail("attribute name must be string");
  return get_attribute(v, a[0].str());
}

Value string_call(const Value& v, std::string_view method, CallArgs& args) {
  return call_method(soft_str(v), method, args);
}

Value f_capitalize(Value& v, CallArgs& args, Interpreter&) {
  bind_args("capitalize", args, {});
  return string_call(v, "capitalize", args);
}

Value f_center(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("center", args, {{"width", Value::integer(80)}});
  CallArgs inner;
  inner.args = {a[0]};
  return string_call(v, "center", inner);
}

Value f_length(Value& v, CallArgs& args, Interpreter&) {
  bind_args("length", args, {});
  auto n = py_len(v);
  if (!n) value_fail("object of type '{}' has no len()", type_name(v));
  return Value::integer(static_cast<std::int64_t>(*n));
}

Value f_default(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("default", args,
                     {{"default_value", Value::string("")}, {"boolean", Value::boolean(false)}});
  if (v.is_undefined() || (truthy(a[1]) && !truthy(v))) return a[0];
  return v;
}

Value f_escape(Value& v, CallArgs& args, Interpreter&) {
  bind_args("escape", args, {});
  if (v.is_markup()) return v;
  return Value::string(html_escape(to_str(v)), true);
}

Value f_forceescape(Value& v, CallArgs& args, Interpreter&) {
  bind_args("forceescape", args, {});
  return Value::string(html_escape(to_str(v)), true);
}

Value f_first(Value& v, CallArgs& args, Interpreter&) {
  bind_args("first", args, {});
  Value empty = Value::undefined("No first item, sequence was empty.");
  if (v.is_seq() && v.seq().one_shot()) {
    const Sequence& seq = v.seq();
    if (seq.cursor >= seq.items.size()) return empty;
    return seq.items[seq.cursor++];
  }
  std::vector<Value> items = iterate(v);
  return items.empty() ? empty : items.front();
}

Value f_last(Value& v, CallArgs& args, Interpreter&) {
  bind_args("last", args, {});
  if (v.is_seq() && v.seq().one_shot()) value_fail("'{}' object is not reversible", type_name(v));
  if (!is_iterable(v)) value_fail("'{}' object is not reversible", type_name(v));
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_int(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("int", args, {{"default", Value::integer(0)}, {"base", Value::integer(10)}});
  auto base = as_index(a[1]);
  if (!base) throw ValueError("int() base must be an integer");
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), *base)) return Value::integer(*i);
    if (auto f = parse_float(v.str())) {
      if (auto i = float_to_int(*f)) return Value::integer(*i);
    }
    return a[0];
  }
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    if (auto i = float_to_int(v.as_double())) return Value::integer(*i);
  }
  return a[0];
}

Value f_float(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("float", args, {{"default", Value::number(0.0)}});
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    if (auto f = parse_float(v.str())) return Value::number(*f);
  }
  return a[0];
}

Value f_format(Value& v, CallArgs& args, Interpreter&) {
  if (!args.args.empty() && !args.kwargs.empty()) {
    throw ValueError("can't handle positional and keyword arguments at the same time");
  }
  Value s = soft_str(v);
  Value fmt_args;
  if (!args.kwargs.empty()) {
    Dict d;
    for (const auto& [k, val] : args.kwargs) d.set(Value::string(k), val);
    fmt_args = Value::dict(std::move(d));
  } else {
    fmt_args = Value::sequence(args.args, SeqKind::kTuple);
  }
  return Value::string(percent_format(s.str(), fmt_args, s.is_markup()), s.is_markup());
}

Value f_indent(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("indent", args,
                     {{"width", Value::integer(4)},
                      {"first", Value::boolean(false)},
                      {"blank", Value::boolean(false)}});
  std::string indention;
  if (a[0].is_string()) {
    indention = a[0].str();
  } else if (auto w = as_index(a[0])) {
    check_size(static_cast<std::size_t>(std::max<std::int64_t>(*w, 0)));
    indention = std::string(static_cast<std::size_t>(std::max<std::int64_t>(*w, 0)), ' ');
  } else {
    value_fail("can't multiply sequence by non-int of type '{}'", type_name(a[0]));
  }
  Value text = soft_str(v);
  // jinja2 appends a newline so that splitlines() keeps a trailing empty line.
  CallArgs none_args;
  std::vector<Value> lines =
      iterate(call_method(Value::string(text.str() + "\n"), "splitlines", none_args));
  std::string rv;
  if (truthy(a[2])) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i].str();
    }
  } else if (!lines.empty()) {
    rv = lines[0].str();
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].str().empty()) rv += indention;
      rv += lines[i].str();
    }
  }
  if (truthy(a[1])) rv = indention + rv;
  check_size(rv.size());
  return Value::string(std::move(rv), text.is_markup());
}

Value f_items(Value& v, CallArgs& args, Interpreter&) {
  bind_args("items", args, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) throw ValueError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().entries()) {
    out.push_back(Value::sequence({k, val}, SeqKind::kTuple));
  }
  return generator(std::move(out));
}

Value f_join(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("join", args, {{"d", Value::string("")}, {"attribute", kNone}});
  std::string sep = to_str(a[0]);
  std::vector<Value> parts_of_attr = a[1].is_none() ? std::vector<Value>{} : attribute_parts(a[1]);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    Value x = a[1].is_none() ? item : get_path(item, parts_of_attr);
    out += x.is_string() ? x.str() : to_str(x);
    check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_list(Value& v, CallArgs& args, Interpreter&) {
  bind_args("list", args, {});
  return Value::sequence(iterate(v));
}

Value f_lower(Value& v, CallArgs& args, Interpreter&) {
  bind_args("lower", args, {});
  return string_call(v, "lower", args);
}

Value f_upper(Value& v, CallArgs& args, Interpreter&) {
  bind_args("upper", args, {});
  return string_call(v, "upper", args);
}

Value f_replace(Value& v, CallArgs& args, Interpreter&) {
  auto a =
      bind_args("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", kNone}});
  CallArgs inner;
  inner.args = {Value::string(to_str(a[0])), Value::string(to_str(a[1])),
                a[2].is_none() ? Value::integer(-1) : a[2]};
  return call_method(Value::string(to_str(v)), "replace", inner);
}

Value f_reverse(Value& v, CallArgs& args, Interpreter&) {
  bind_args("reverse", args, {});
  if (v.is_string()) return get_slice(v, kNone, kNone, Value::integer(-1));
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  bool reversible = !(v.is_seq() && v.seq().one_shot());
  return Value::sequence(std::move(items), reversible ? SeqKind::kReverseIterator : SeqKind::kList);
}

Value f_round(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("round", args,
                     {{"precision", Value::integer(0)}, {"method", Value::string("common")}});
  std::string method = a[1].is_string() ? a[1].str() : "";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw ValueError("method must be common, ceil or floor");
  }
  auto precision = as_index(a[0]);
  if (!precision) value_fail("'{}' object cannot be interpreted as an integer", type_name(a[0]));
  if (!v.is_number()) value_fail("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_integral()) return Value::integer(v.as_int());
    return Value::number(round_half_even(v.as_double(), *precision));
  }
  double scale = std::pow(10.0, static_cast<double>(*precision));
  double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Value& v, CallArgs& args, Interpreter&) {
  bind_args("safe", args, {});
  return Value::string(to_str(v), true);
}

Value f_string(Value& v, CallArgs& args, Interpreter&) {
  bind_args("string", args, {});
  return soft_str(v);
}

Value f_title(Value& v, CallArgs& args, Interpreter&) {
  bind_args("title", args, {});
  // jinja2 splits on runs of [-\s({[<] (kept) and upper-cases the first character of each piece.
  std::u32string cps = uni::decode(soft_str(v).str());
  auto is_break = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || uni::is_space(c);
  };
  std::string out;
  std::size_t i = 0;
  while (i < cps.size()) {
    std::size_t j = i;
    bool brk = is_break(cps[i]);
    while (j < cps.size() && is_break(cps[j]) == brk) ++j;
    std::u32string_view piece = std::u32string_view(cps).substr(i, j - i);
    out += uni::upper(uni::encode(piece.substr(0, 1)));
    out += uni::lower(uni::encode(piece.substr(1)));
    i = j;
  }
  return Value::string(std::move(out));
}

Value f_tojson(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("tojson", args,
                     {{"ensure_ascii", Value::boolean(false)},
                      {"indent", kNone},
                      {"separators", kNone},
                      {"sort_keys", Value::boolean(false)}});
  JsonDumpOptions options;
  options.ensure_ascii = truthy(a[0]);
  if (a[1].is_string()) {
    options.indent = a[1].str();
  } else if (auto n = as_index(a[1])) {
    options.indent =
        std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(*n, 0, 1000)), ' ');
  } else if (!a[1].is_none()) {
    value_fail("can't multiply sequence by non-int of type '{}'", type_name(a[1]));
  }
  if (!a[2].is_none()) {
    std::vector<Value> seps = iterate(a[2]);
    if (seps.size() != 2) value_fail("separators must be a pair of strings");
    for (const Value& s : seps) {
      if (!s.is_string()) value_fail("separators must be a pair of strings");
    }
    options.item_separator = seps[0].str();
    options.key_separator = seps[1].str();
  }
  options.sort_keys = truthy(a[3]);
  return Value::string(dump_json(v, options));
}

Value f_trim(Value& v, CallArgs& args, Interpreter&) {
  auto a = bind_args("trim", args, {{"chars", kNone}});
  CallArgs inner;
  inner.args = {a[0]};
  return string_call(v, "strip", inner);
}

Value f_wordcount(Value& v, CallArgs& args, Interpreter&) {
  bind_args("wordcount", args, {});
  std::int64_t words = 0;
  bool in_word = false;
  const std::string s = soft_str(v).str();
  for (std::size_t pos = 0; pos < s.size();) {
    char32_t cp = uni::next(s, pos);
    bool w = cp == '_' || uni::is_alnum(cp);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

const std::map<std::string, FilterFn, std::less<>>& filter_table() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_forceescape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

bool is_known_filter(std::string_view name) {
  return filter_table().count(name) > 0;
}

Value call_filter(std::string_view name, Value operand, CallArgs& args, Interpreter& interp) {
  auto it = filter_table().find(name);
  if (it == filter_table().end()) value_fail("No filter named '{}'.", name);
  return it->second(operand, args, interp);
}

}  // namespace md::jinja
