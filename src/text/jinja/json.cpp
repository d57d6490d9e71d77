#include "text/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "text/jinja/unicode.h"

namespace md::jinja {

namespace {

constexpr int kMaxJsonDepth = 200;

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) throw ValueError("JSON input nested too deeply");
  using Kind = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Kind::null:
      return Value::none();
    case Kind::boolean:
      return Value::boolean(j.get<bool>());
    case Kind::number_integer:
      return Value::integer(j.get<std::int64_t>());
    case Kind::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw ValueError("JSON integer too large (more than 63 bits)");
      }
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case Kind::number_float:
      return Value::number(j.get<double>());
    case Kind::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (!uni::is_valid_utf8(s)) throw ValueError("JSON string is not valid UTF-8");
      return Value::string(s);
    }
    case Kind::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_at(item, depth + 1));
      return Value::sequence(std::move(items));
    }
    case Kind::object: {
      Dict d;
      for (const auto& [key, item] : j.items()) {
        if (!uni::is_valid_utf8(key)) throw ValueError("JSON key is not valid UTF-8");
        d.set(Value::string(key), from_json_at(item, depth + 1));
      }
      return Value::dict(std::move(d));
    }
    default:
      throw ValueError("unsupported JSON value (binary or discarded)");
  }
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return format_float(f);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : options_(options) {
    item_sep_ = options.item_separator.value_or(options.indent ? "," : ", ");
    key_sep_ = options.key_separator.value_or(": ");
  }

  void dump(const Value& v, int level) {
    if (level > kMaxJsonDepth) throw ValueError("Circular reference detected");
    switch (v.type()) {
      case Value::Type::kNone:
        out_ += "null";
        return;
      case Value::Type::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Value::Type::kInt:
        out_ += std::to_string(v.as_int());
        return;
      case Value::Type::kFloat:
        out_ += float_json(v.as_double());
        return;
      case Value::Type::kString:
        string(v.str());
        return;
      case Value::Type::kSeq:
        if (v.is_list_or_tuple()) {
          list(v.seq().items, level);
          return;
        }
        break;
      case Value::Type::kDict:
        dict(v.dict(), level);
        return;
      default:
        break;
    }
    value_fail("Object of type {} is not JSON serializable", type_name(v));
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  void list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    if (options_.indent) newline(level + 1);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out_ += item_sep_;
        if (options_.indent) newline(level + 1);
      }
      dump(items[i], level + 1);
    }
    if (options_.indent) newline(level);
    out_ += ']';
  }

  std::string key_text(const Value& key) {
    switch (key.type()) {
      case Value::Type::kString:
        return key.str();
      case Value::Type::kFloat:
        return float_json(key.as_double());
      case Value::Type::kBool:
        return key.as_bool() ? "true" : "false";
      case Value::Type::kNone:
        return "null";
      case Value::Type::kInt:
        return std::to_string(key.as_int());
      default:
        value_fail("keys must be str, int, float, bool or None, not {}", type_name(key));
    }
  }

  void dict(const Dict& d, int level) {
    if (d.size() == 0) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries()) entries.push_back(&e);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return py_less(a->first, b->first); });
    }
    out_ += '{';
    if (options_.indent) newline(level + 1);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) {
        out_ += item_sep_;
        if (options_.indent) newline(level + 1);
      }
      string(key_text(entries[i]->first));
      out_ += key_sep_;
      dump(entries[i]->second, level + 1);
    }
    if (options_.indent) newline(level);
    out_ += '}';
  }

  void string(std::string_view s) {
    out_ += '"';
    for (std::size_t pos = 0; pos < s.size();) {
      std::size_t start = pos;
      char32_t cp = uni::next(s, pos);
      switch (cp) {
        case '"':
          out_ += "\\\"";
          continue;
        case '\\':
          out_ += "\\\\";
          continue;
        case '\n':
          out_ += "\\n";
          continue;
        case '\r':
          out_ += "\\r";
          continue;
        case '\t':
          out_ += "\\t";
          continue;
        case '\b':
          out_ += "\\b";
          continue;
        case '\f':
          out_ += "\\f";
          continue;
        default:
          break;
      }
      if (cp < 0x20 || (options_.ensure_ascii && cp > 0x7E)) {
        if (cp >= 0x10000) {
          char32_t v = cp - 0x10000;
          out_ += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 | (v >> 10)),
                              static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
        } else {
          out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
        }
        continue;
      }
      out_.append(s.substr(start, pos - start));
    }
    out_ += '"';
  }

  const JsonDumpOptions& options_;
  std::string item_sep_;
  std::string key_sep_;
  std::string out_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) {
  return from_json_at(json, 0);
}

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  Dumper dumper(options);
  dumper.dump(value, 0);
  return dumper.take();
}

}  // namespace md::jinja
