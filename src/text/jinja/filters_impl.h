// Internal to the filter library: helpers shared by the filter files and the filters that work
// on whole sequences (sequence_filters.cpp), registered by filters.cpp.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/builtins.h"
#include "text/jinja/value.h"

namespace md::jinja::filters {

inline Value generator(std::vector<Value> items) {
  return Value::sequence(std::move(items), SeqKind::kGenerator);
}

// soft_str: strings (and Markup) stay as they are, anything else goes through str().
inline Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(to_str(v));
}

Value ignore_case(const Value& v);
// jinja2's make_attrgetter: "a.b.0" walks items with getitem; digit parts become indices.
std::vector<Value> attribute_parts(const Value& attribute);
Value get_path(Value item, const std::vector<Value>& parts, const Value* dflt = nullptr);

Value f_batch(Value& v, CallArgs& args, Interpreter& interp);
Value f_dictsort(Value& v, CallArgs& args, Interpreter& interp);
Value f_map(Value& v, CallArgs& args, Interpreter& interp);
Value f_max(Value& v, CallArgs& args, Interpreter& interp);
Value f_min(Value& v, CallArgs& args, Interpreter& interp);
Value f_select(Value& v, CallArgs& args, Interpreter& interp);
Value f_reject(Value& v, CallArgs& args, Interpreter& interp);
Value f_selectattr(Value& v, CallArgs& args, Interpreter& interp);
Value f_rejectattr(Value& v, CallArgs& args, Interpreter& interp);
Value f_sort(Value& v, CallArgs& args, Interpreter& interp);
Value f_sum(Value& v, CallArgs& args, Interpreter& interp);
Value f_unique(Value& v, CallArgs& args, Interpreter& interp);

}  // namespace md::jinja::filters
