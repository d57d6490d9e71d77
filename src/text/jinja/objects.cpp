#include "text/jinja/objects.h"

#include <algorithm>
#include <ctime>
#include <map>

#include "text/jinja/builtins.h"

namespace md::jinja {

// --- Namespace -----------------------------------------------------------------------------------

std::string Namespace::repr() const {
  // A namespace that (indirectly) contains itself prints as Python does: <Namespace {...}>.
  thread_local std::vector<const Namespace*> active;
  if (std::find(active.begin(), active.end(), this) != active.end()) return "<Namespace {...}>";
  active.push_back(this);
  struct Pop {
    ~Pop() { active.pop_back(); }
  } pop;
  return "<Namespace " + jinja::repr(Value::dict(attrs_)) + ">";
}

Value Namespace::getattr(std::string_view name) const {
  if (const Value* v = attrs_.find(name)) return *v;
  return Value::undefined(
      fmt::format("'jinja2.utils.Namespace object' has no attribute '{}'", name));
}

bool Namespace::set_attr(const std::string& name, Value value) {
  attrs_.set(Value::string(name), std::move(value));
  return true;
}

// --- Macro ---------------------------------------------------------------------------------------

Value Macro::getattr(std::string_view name) const {
  if (name == "name") return Value::string(def_.name);
  if (name == "arguments") {
    std::vector<Value> names;
    for (const auto& p : def_.params) names.push_back(Value::string(p.name));
    return Value::sequence(std::move(names), SeqKind::kTuple);
  }
  if (name == "catch_kwargs") return Value::boolean(def_.catch_kwargs);
  if (name == "catch_varargs") return Value::boolean(def_.catch_varargs);
  return Object::getattr(name);
}

Value Macro::call(Interpreter& interp, CallArgs& args) {
  std::shared_ptr<Frame> closure = closure_.lock();
  if (!closure) value_fail("macro '{}' was called after its scope ended", def_.name);
  return interp.call_macro(def_, closure, args);
}

// --- LoopContext ---------------------------------------------------------------------------------

std::string LoopContext::repr() const {
  return fmt::format("<LoopContext {}/{}>", index0_ + 1, items_->size());
}

Value LoopContext::getattr(std::string_view name) const {
  auto n = static_cast<std::int64_t>(items_->size());
  auto i = static_cast<std::int64_t>(index0_);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    if (i == 0) return Value::undefined("there is no previous item");
    return (*items_)[index0_ - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::undefined("there is no next item");
    return (*items_)[index0_ + 1];
  }
  if (name == "cycle" || name == "changed") {
    auto self = std::const_pointer_cast<LoopContext>(shared_from_this());
    bool cycle_fn = name == "cycle";
    return Value::object(std::make_shared<NativeFunction>(
        std::string(name), [self, cycle_fn](Interpreter&, CallArgs& args) {
          return cycle_fn ? self->cycle(args) : self->changed(args);
        }));
  }
  return Object::getattr(name);
}

Value LoopContext::cycle(const CallArgs& args) const {
  if (args.args.empty()) throw ValueError("no items for cycling given");
  return args.args[index0_ % args.args.size()];
}

Value LoopContext::changed(const CallArgs& args) {
  bool same = has_last_changed_ && last_changed_.size() == args.args.size();
  for (std::size_t i = 0; same && i < args.args.size(); ++i) {
    same = py_equal(last_changed_[i], args.args[i]);
  }
  if (same) return Value::boolean(false);
  last_changed_ = args.args;
  has_last_changed_ = true;
  return Value::boolean(true);
}

// --- globals -------------------------------------------------------------------------------------

namespace {

// The sandbox refuses ranges with more items than this (jinja2's MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

std::int64_t range_arg(const Value& v) {
  if (auto i = as_index(v)) return *i;
  value_fail("'{}' object cannot be interpreted as an integer", type_name(v));
}

Value global_range(Interpreter&, CallArgs& args) {
  if (!args.kwargs.empty()) throw ValueError("range() takes no keyword arguments");
  if (args.args.empty() || args.args.size() > 3) {
    value_fail("range expected at most 3 arguments, got {}", args.args.size());
  }
  std::int64_t start = 0, stop, step = 1;
  if (args.args.size() == 1) {
    stop = range_arg(args.args[0]);
  } else {
    start = range_arg(args.args[0]);
    stop = range_arg(args.args[1]);
    if (args.args.size() == 3) step = range_arg(args.args[2]);
  }
  if (step == 0) throw ValueError("range() arg 3 must not be zero");
  long double count = step > 0 ? (static_cast<long double>(stop) - start) / step
                               : (static_cast<long double>(start) - stop) / -step;
  if (count > kMaxRange) {
    throw ValueError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).",
                     TemplateError::Kind::kLimit);
  }
  return Value::range(start, stop, step);
}

void merge_mapping(Dict& into, const Value& source, std::string_view func) {
  if (source.is_dict()) {
    for (const auto& [k, v] : source.dict().entries()) into.set(k, v);
    return;
  }
  for (const Value& pair : iterate(source)) {
    std::vector<Value> kv = iterate(pair);
    if (kv.size() != 2) value_fail("{}(): sequence elements must have length 2", func);
    require_hashable(kv[0]);
    into.set(kv[0], kv[1]);
  }
}

Value global_dict(Interpreter&, CallArgs& args) {
  if (args.args.size() > 1)
    value_fail("dict expected at most 1 argument, got {}", args.args.size());
  Dict d;
  if (!args.args.empty()) merge_mapping(d, args.args[0], "dict");
  for (const auto& [k, v] : args.kwargs) d.set(Value::string(k), v);
  return Value::dict(std::move(d));
}

Value global_namespace(Interpreter& interp, CallArgs& args) {
  if (args.args.size() > 1) throw ValueError("namespace() takes at most 1 positional argument");
  auto ns = std::make_shared<Namespace>();
  Dict initial;
  if (!args.args.empty()) merge_mapping(initial, args.args[0], "namespace");
  for (const auto& [k, v] : initial.entries()) {
    if (!k.is_string()) throw ValueError("namespace() keywords must be strings");
    ns->set_attr(k.str(), v);
  }
  for (const auto& [k, v] : args.kwargs) ns->set_attr(k, v);
  interp.track(ns);
  return Value::object(ns);
}

Value global_raise_exception(Interpreter&, CallArgs& args) {
  std::vector<Value> a = bind_args("raise_exception", args, {{"message", std::nullopt}});
  throw ValueError(to_str(a[0]), TemplateError::Kind::kRaised);
}

Value global_strftime_now(Interpreter&, CallArgs& args) {
  std::vector<Value> a = bind_args("strftime_now", args, {{"format", std::nullopt}});
  if (!a[0].is_string()) value_fail("strftime() argument 1 must be str, not {}", type_name(a[0]));
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + a[0].str().size() * 16, '\0');
  std::size_t n =
      a[0].str().empty() ? 0 : std::strftime(out.data(), out.size(), a[0].str().c_str(), &local);
  out.resize(n);
  return Value::string(std::move(out));
}

Value global_joiner(Interpreter&, CallArgs& args) {
  std::vector<Value> a = bind_args("joiner", args, {{"sep", Value::string(", ")}});
  auto used = std::make_shared<bool>(false);
  Value sep = a[0];
  return Value::object(
      std::make_shared<NativeFunction>("joiner", [used, sep](Interpreter&, CallArgs&) {
        if (!*used) {
          *used = true;
          return Value::string("");
        }
        return sep;
      }));
}

const std::map<std::string, Value, std::less<>>& globals() {
  static const auto* table = [] {
    auto* m = new std::map<std::string, Value, std::less<>>();
    auto add = [&](const char* name, NativeFunction::Fn fn) {
      (*m)[name] = Value::object(std::make_shared<NativeFunction>(name, std::move(fn), "function"));
    };
    add("range", global_range);
    add("dict", global_dict);
    add("namespace", global_namespace);
    add("raise_exception", global_raise_exception);
    add("strftime_now", global_strftime_now);
    add("joiner", global_joiner);
    return m;
  }();
  return *table;
}

}  // namespace

Value lookup_global(std::string_view name) {
  const auto& table = globals();
  auto it = table.find(name);
  if (it == table.end()) return Value::undefined(fmt::format("'{}' is undefined", name));
  return it->second;
}

}  // namespace md::jinja
