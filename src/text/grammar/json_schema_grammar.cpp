#include "text/grammar/json_schema_grammar.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "text/grammar/gbnf_parser.h"
#include "text/grammar/regex_grammar.h"

namespace md::grammar {
namespace {

using Json = nlohmann::ordered_json;

// The rules every compiled schema may use: JSON's own grammar (compact, at most one space between
// tokens) and the string formats. A JSON string character is written as itself or as an escape;
// \u escapes of surrogates are left out (a lone one is not a character, and a pair would count as
// two characters here but one for a validator's maxLength).
constexpr std::string_view kJsonRules = R"(ws ::= [ ]?
jhex ::= [0-9a-fA-F]
jchar ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" jescape)
jescape ::= [0-9a-cA-Ce-fE-F] jhex jhex jhex | [dD] [0-7] jhex jhex
jstring ::= "\"" jchar* "\""
jinteger ::= "-"? ("0" | [1-9] [0-9]*)
jnumber ::= jinteger ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
jboolean ::= "true" | "false"
jnull ::= "null"
jvalue ::= jobject | jarray | jstring | jnumber | jboolean | jnull
jobject ::= "{" ws (jmember (ws "," ws jmember)*)? ws "}"
jmember ::= jstring ws ":" ws jvalue
jarray ::= "[" ws (jvalue (ws "," ws jvalue)*)? ws "]"
fmt-day31 ::= "0" [1-9] | [12] [0-9] | "3" [01]
fmt-day30 ::= "0" [1-9] | [12] [0-9] | "30"
fmt-day28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
fmt-date ::= [1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" fmt-day31 | ("0" [469] | "11") "-" fmt-day30 | "02-" fmt-day28)
fmt-hour ::= [01] [0-9] | "2" [0-3]
fmt-minute ::= [0-5] [0-9]
fmt-time ::= fmt-hour ":" fmt-minute ":" fmt-minute ("." [0-9]{1,6})? ("Z" | [+-] fmt-hour ":" fmt-minute)
fmt-date-time ::= fmt-date "T" fmt-time
fmt-n ::= [0-9]+
fmt-duration ::= "P" (fmt-dur-date fmt-dur-time? | fmt-dur-time | fmt-n "W")
fmt-dur-date ::= fmt-n "Y" (fmt-n "M" (fmt-n "D")?)? | fmt-n "M" (fmt-n "D")? | fmt-n "D"
fmt-dur-time ::= "T" (fmt-n "H" (fmt-n "M" (fmt-n "S")?)? | fmt-n "M" (fmt-n "S")? | fmt-n "S")
fmt-label ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,38} [a-zA-Z0-9])?
fmt-hostname ::= fmt-label ("." fmt-label){0,4}
fmt-atom ::= [a-zA-Z0-9_+-]+
fmt-email ::= fmt-atom ("." fmt-atom){0,3} "@" fmt-hostname
fmt-octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]
fmt-ipv4 ::= fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet
fmt-h16 ::= jhex{1,4}
fmt-ipv6 ::= fmt-h16 (":" fmt-h16){7}
fmt-uuid ::= jhex{8} "-" jhex{4} "-" jhex{4} "-" jhex{4} "-" jhex{12}
xchar ::= [^<]
)";

const std::set<std::string, std::less<>> kFormats = {
    "date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"};

// Assertions this compiler cannot honour: refused by name rather than silently ignored.
const std::set<std::string, std::less<>> kUnsupported = {"allOf",
                                                         "oneOf",
                                                         "not",
                                                         "if",
                                                         "then",
                                                         "else",
                                                         "patternProperties",
                                                         "propertyNames",
                                                         "uniqueItems",
                                                         "multipleOf",
                                                         "minProperties",
                                                         "maxProperties",
                                                         "contains",
                                                         "minContains",
                                                         "maxContains",
                                                         "dependentRequired",
                                                         "dependentSchemas",
                                                         "dependencies",
                                                         "unevaluatedProperties",
                                                         "unevaluatedItems",
                                                         "additionalItems",
                                                         "$dynamicRef",
                                                         "$recursiveRef"};

// Keywords that assert nothing (or that the compiler reads elsewhere).
const std::set<std::string, std::less<>> kAnnotations = {
    "title",          "description",      "$schema",         "$id",
    "$comment",       "default",          "examples",        "deprecated",
    "readOnly",       "writeOnly",        "$anchor",         "$defs",
    "definitions",    "contentMediaType", "contentEncoding", "$vocabulary",
    "$dynamicAnchor", "$recursiveAnchor"};

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxBound = 1'000'000'000'000'000'000;  // 1e18: integer bounds beyond are refused
constexpr int64_t kMaxCount = 10'000;                     // minItems, minLength, ... above: refused

std::string format_names() {
  std::string out;
  for (const std::string& name : kFormats) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// ---- Integer ranges as digit grammars ----

// Decimal strings of equal length lo <= hi, leading zeros allowed: every string between.
std::string digits_between(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return gbnf_literal(lo);
  std::size_t rest = lo.size() - 1;
  auto sub = [](const std::string& s) { return s.substr(1); };
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " " + digits_between(sub(lo), sub(hi));
  auto any_digits = [&] { return rest ? fmt::format(" [0-9]{{{}}}", rest) : std::string(); };
  bool lo_whole = sub(lo) == std::string(rest, '0');
  bool hi_whole = sub(hi) == std::string(rest, '9');
  std::vector<std::string> parts;
  char first = lo[0], last = hi[0];
  if (!lo_whole) {
    parts.push_back(gbnf_literal(lo.substr(0, 1)) + " " +
                    digits_between(sub(lo), std::string(rest, '9')));
    ++first;
  }
  std::string high_part;
  if (!hi_whole) {
    high_part =
        gbnf_literal(hi.substr(0, 1)) + " " + digits_between(std::string(rest, '0'), sub(hi));
    --last;
  }
  if (first <= last) parts.push_back(fmt::format("[{}-{}]", first, last) + any_digits());
  if (!hi_whole) parts.push_back(high_part);
  return gbnf_alternatives(parts);
}

uint64_t power10(std::size_t digits) {
  uint64_t p = 1;
  for (std::size_t i = 0; i < digits; ++i) p *= 10;
  return p;
}

// Non-negative integers in [lo, hi] (hi absent: unbounded), without leading zeros.
std::string unsigned_range(uint64_t lo, std::optional<uint64_t> hi) {
  std::size_t lo_len = std::to_string(lo).size();
  std::size_t hi_len = hi ? std::to_string(*hi).size() : lo_len;
  std::vector<std::string> parts;
  for (std::size_t len = lo_len; len <= hi_len; ++len) {
    uint64_t from = len == lo_len ? lo : power10(len - 1);
    uint64_t to = hi && len == hi_len ? *hi : power10(len) - 1;
    if (from <= to) parts.push_back(digits_between(std::to_string(from), std::to_string(to)));
  }
  if (!hi) parts.push_back(fmt::format("[1-9] [0-9]{{{},}}", lo_len));
  return gbnf_alternatives(parts);
}

// Integers in [lo, hi], either side open when absent; empty string when there are none.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> parts;
  if (!hi || *hi >= 0) {
    uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    if (!to || from <= *to) parts.push_back(unsigned_range(from, to));
  }
  if (!lo || *lo < 0) {
    uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-*lo);
    if (!to || from <= *to) parts.push_back("\"-\" " + unsigned_range(from, to));
  }
  return parts.empty() ? "" : gbnf_alternatives(parts);
}

// ---- The compiler ----

class Compiler {
 public:
  Compiler(const Json& root, std::string prefix, std::string& rules, bool no_angle)
      : root_(root), prefix_(std::move(prefix)), rules_(rules), no_angle_(no_angle) {}

  std::string value() { return compile(root_, "#", 0); }

  // Raw text (no quotes, no '<', never the text null): a tool call's XML parameter value of a
  // string schema, which the parser keeps as text.
  std::string raw_string() {
    if (!root_.is_object()) refuse("type", "#", "expected a string schema");
    for (const auto& [key, value] : root_.items()) {
      if (kUnsupported.count(key) != 0) unsupported(key, "#");
    }
    if (root_.contains("$ref") || root_.contains("anyOf")) {
      refuse(root_.contains("$ref") ? "$ref" : "anyOf", "#", "expected a plain string schema");
    }
    for (const char* key : {"const", "enum"}) {
      if (!root_.contains(key)) continue;
      only_beside(root_, "#", key, {"type"});
      const Json values = key == std::string_view("const") ? Json::array({root_[key]}) : root_[key];
      if (!values.is_array() || values.empty()) refuse(key, "#", "must be a non-empty array");
      std::vector<std::string> parts;
      for (const Json& v : values) {
        if (!v.is_string()) refuse(key, "#", "a parameter value written as text must be a string");
        if (v.get<std::string>() != "null") parts.push_back(gbnf_literal(v.get<std::string>()));
      }
      if (parts.empty()) refuse(key, "#", "the text null would be read as null, not a string");
      return gbnf_alternatives(parts);
    }
    return string_schema(root_, "#", /*raw=*/true);
  }

 private:
  [[noreturn]] static void refuse(const std::string& keyword, const std::string& at,
                                  const std::string& why) {
    throw JsonSchemaError(keyword, at,
                          fmt::format("JSON schema keyword '{}' at {}: {}", keyword, at, why));
  }
  [[noreturn]] static void unsupported(const std::string& keyword, const std::string& at) {
    refuse(keyword, at, "not supported by structured output");
  }

  std::string define(const std::string& body) {
    std::string name = fmt::format("{}{}", prefix_, next_rule_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  static std::string child(const std::string& at, std::string_view key) {
    std::string escaped;
    for (char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return at + "/" + escaped;
  }

  // Only annotations and `allowed` may sit beside a keyword that decides the whole schema.
  static void only_beside(const Json& schema, const std::string& at, std::string_view keyword,
                          std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : schema.items()) {
      if (key == keyword || kAnnotations.count(key) != 0) continue;
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      refuse(key, at, fmt::format("'{}' beside '{}' is not supported", key, keyword));
    }
  }

  static std::optional<int64_t> count(const Json& schema, const std::string& at,
                                      const char* keyword) {
    if (!schema.contains(keyword)) return std::nullopt;
    const Json& v = schema[keyword];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      refuse(keyword, at, "must be a non-negative integer");
    }
    if (v.get<int64_t>() > kMaxCount) refuse(keyword, at, fmt::format("above {}", kMaxCount));
    return v.get<int64_t>();
  }

  std::string compile(const Json& schema, const std::string& at, int depth) {
    if (depth > kMaxDepth) refuse("$ref", at, fmt::format("nested deeper than {}", kMaxDepth));
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return "jvalue";
      refuse("false", at, "the schema false allows no value");
    }
    if (!schema.is_object()) refuse("type", at, "a schema must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (kUnsupported.count(key) != 0) unsupported(key, at);
    }
    if (schema.contains("$ref")) {
      only_beside(schema, at, "$ref", {});
      return reference(schema["$ref"], child(at, "$ref"), depth);
    }
    std::vector<std::string> types = declared_types(schema, at);
    // Other assertions beside const / enum would have to filter the values: refused instead.
    if (schema.contains("const")) {
      only_beside(schema, at, "const", {"type"});
      return constant(schema["const"], types, child(at, "const"));
    }
    if (schema.contains("enum")) {
      only_beside(schema, at, "enum", {"type"});
      return enumeration(schema["enum"], types, child(at, "enum"));
    }
    if (schema.contains("anyOf")) {
      only_beside(schema, at, "anyOf", {});
      const Json& options = schema["anyOf"];
      if (!options.is_array() || options.empty()) refuse("anyOf", at, "must be a non-empty array");
      std::vector<std::string> parts;
      for (std::size_t i = 0; i < options.size(); ++i) {
        parts.push_back(
            compile(options[i], child(child(at, "anyOf"), std::to_string(i)), depth + 1));
      }
      return gbnf_alternatives(parts);
    }
    if (types.empty()) types = inferred_types(schema);
    if (types.empty()) return "jvalue";
    std::vector<std::string> parts;
    for (const std::string& type : types) parts.push_back(typed(schema, type, at, depth));
    return gbnf_alternatives(parts);
  }

  static std::vector<std::string> declared_types(const Json& schema, const std::string& at) {
    if (!schema.contains("type")) return {};
    const Json& type = schema["type"];
    std::vector<std::string> out;
    auto add = [&](const Json& name) {
      static const std::set<std::string, std::less<>> known = {
          "string", "number", "integer", "boolean", "null", "object", "array"};
      if (!name.is_string() || known.count(name.get<std::string>()) == 0) {
        refuse("type", at, "must be string, number, integer, boolean, null, object or array");
      }
      out.push_back(name.get<std::string>());
    };
    if (type.is_array()) {
      if (type.empty()) refuse("type", at, "an empty type list allows no value");
      for (const Json& t : type) add(t);
    } else {
      add(type);
    }
    return out;
  }

  static std::vector<std::string> inferred_types(const Json& schema) {
    auto any = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) {
        if (schema.contains(k)) return true;
      }
      return false;
    };
    if (any({"properties", "required", "additionalProperties"})) return {"object"};
    if (any({"items", "prefixItems", "minItems", "maxItems"})) return {"array"};
    if (any({"minLength", "maxLength", "pattern", "format"})) return {"string"};
    if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) return {"number"};
    return {};
  }

  static bool fits(const Json& value, const std::vector<std::string>& types) {
    if (types.empty()) return true;
    for (const std::string& t : types) {
      if ((t == "string" && value.is_string()) || (t == "boolean" && value.is_boolean()) ||
          (t == "null" && value.is_null()) || (t == "object" && value.is_object()) ||
          (t == "array" && value.is_array()) || (t == "number" && value.is_number()) ||
          (t == "integer" &&
           (value.is_number_integer() ||
            (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>())))) {
        return true;
      }
    }
    return false;
  }

  // A JSON value as a GBNF literal; without raw '<' when asked (tool calls: the parser ends a
  // call at the first "</tool_call>", so '<' inside strings is written as \u003c).
  std::string written(const Json& value) const {
    std::string text = value.dump();
    if (!no_angle_) return gbnf_literal(text);
    std::string escaped;
    for (char c : text) {
      if (c == '<') {
        escaped += "\\u003c";
      } else {
        escaped += c;
      }
    }
    return gbnf_literal(escaped);
  }

  std::string constant(const Json& value, const std::vector<std::string>& types,
                       const std::string& at) const {
    if (!fits(value, types)) refuse("const", at, "the value does not have the schema's type");
    return written(value);
  }

  std::string enumeration(const Json& values, const std::vector<std::string>& types,
                          const std::string& at) const {
    if (!values.is_array() || values.empty()) refuse("enum", at, "must be a non-empty array");
    std::vector<std::string> parts;
    for (const Json& v : values) {
      if (fits(v, types)) parts.push_back(written(v));
    }
    if (parts.empty()) refuse("enum", at, "no value has the schema's type");
    return gbnf_alternatives(parts);
  }

  std::string reference(const Json& ref, const std::string& at, int depth) {
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0) {
      refuse("$ref", at, "only references within the schema (\"#/...\") are supported");
    }
    std::string pointer = ref.get<std::string>().substr(1);
    if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(pointer));
    } catch (const std::exception&) {
      refuse("$ref", at, fmt::format("'{}' does not resolve", ref.get<std::string>()));
    }
    // Named before compiled, so that recursive references find it.
    std::string name = fmt::format("{}{}", prefix_, next_rule_++);
    refs_.emplace(pointer, name);
    std::string body = compile(*target, "#" + pointer, depth + 1);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  std::string typed(const Json& schema, const std::string& type, const std::string& at, int depth) {
    if (type == "string") return string_schema(schema, at, /*raw=*/false);
    if (type == "integer") return integer_schema(schema, at);
    if (type == "number") return number_schema(schema, at);
    if (type == "boolean") return "jboolean";
    if (type == "null") return "jnull";
    if (type == "object") return object_schema(schema, at, depth);
    return array_schema(schema, at, depth);
  }

  // A JSON string, or (raw) its text unquoted without '<' and, when free, never exactly null.
  std::string string_schema(const Json& schema, const std::string& at, bool raw) const {
    const std::string quote = raw ? "" : "\"\\\"\"";
    auto quoted = [&](const std::string& body) {
      return raw ? body : quote + " " + body + " " + quote;
    };
    const std::string any_char = raw ? "xchar" : "jchar";
    std::optional<int64_t> min = count(schema, at, "minLength");
    std::optional<int64_t> max = count(schema, at, "maxLength");
    if (schema.contains("format")) {
      const Json& format = schema["format"];
      if (!format.is_string() || kFormats.count(format.get<std::string>()) == 0) {
        refuse("format", child(at, "format"),
               fmt::format("format {} is not supported (supported: {})", format.dump(),
                           format_names()));
      }
      if (schema.contains("pattern"))
        refuse("pattern", at, "'pattern' beside 'format' is not supported");
      if (min || max)
        refuse(min ? "minLength" : "maxLength", at, "a length beside 'format' is not supported");
      return quoted("fmt-" + format.get<std::string>());
    }
    if (schema.contains("pattern")) {
      if (min || max)
        refuse(min ? "minLength" : "maxLength", at, "a length beside 'pattern' is not supported");
      const Json& pattern = schema["pattern"];
      if (!pattern.is_string()) refuse("pattern", at, "must be a string");
      try {
        return quoted(regex_to_gbnf(pattern.get<std::string>(), any_char,
                                    raw         ? RegexText::kRawNoAngle
                                    : no_angle_ ? RegexText::kJsonStringNoAngle
                                                : RegexText::kJsonString));
      } catch (const JsonSchemaError&) {
        throw;
      } catch (const Error& e) {
        refuse("pattern", child(at, "pattern"), e.what());
      }
    }
    if (max && *max < min.value_or(0)) refuse("maxLength", at, "is below minLength");
    if (raw) return raw_text(min.value_or(0), max);
    if (!min && !max) return "jstring";
    std::string repeat = max ? fmt::format("{{{},{}}}", min.value_or(0), *max)
                             : fmt::format("{{{},}}", min.value_or(0));
    return quoted(any_char + repeat);
  }

  // xchar{from, to} (to absent: unbounded); "" when nothing remains.
  static std::string chars(int64_t from, std::optional<int64_t> to) {
    if (to && *to <= 0) return "\"\"";
    from = std::max<int64_t>(from, 0);
    return to ? fmt::format("xchar{{{},{}}}", from, *to) : fmt::format("xchar{{{},}}", from);
  }

  // Raw text of min..max characters that the tool-call parser keeps as text: it reads a value
  // whose trimmed text is null as null, so the text starts with no white space and, when it
  // starts with "null", continues with something other than white space.
  static std::string raw_text(int64_t min, std::optional<int64_t> max) {
    static constexpr std::string_view kNull = "null";
    const std::string space = "\\x09-\\x0D\\x20";
    auto minus = [&](int64_t k) -> std::optional<int64_t> {
      if (!max) return std::nullopt;
      return *max - k;
    };
    auto fits = [&](int64_t length) { return !max || length <= *max; };
    // matched(d): "null"[0..d) written so far (d >= 1).
    std::function<std::string(std::size_t)> matched = [&](std::size_t d) -> std::string {
      auto length = static_cast<int64_t>(d);
      std::vector<std::string> parts;
      if (d == kNull.size()) {
        if (fits(length + 1)) {
          parts.push_back("[^<" + space + "] " + chars(min - length - 1, minus(length + 1)));
        }
      } else {
        if (length >= min) parts.push_back("\"\"");
        if (fits(length + 1)) {
          std::string next(1, kNull[d]);
          parts.push_back("[^<" + next + "] " + chars(min - length - 1, minus(length + 1)));
          // Only while something may still follow "null" (the text null alone is refused).
          if (std::string deeper = matched(d + 1); !deeper.empty()) {
            parts.push_back(gbnf_literal(next) + " " + deeper);
          }
        }
      }
      return parts.empty() ? std::string() : gbnf_alternatives(parts);  // "": no way on
    };
    std::vector<std::string> parts;
    if (min == 0) parts.push_back("\"\"");
    if (fits(1)) {
      parts.push_back("[^<n" + space + "] " + chars(min - 1, minus(1)));
      if (std::string deeper = matched(1); !deeper.empty()) parts.push_back("\"n\" " + deeper);
    }
    return gbnf_alternatives(parts);
  }

  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_exclusive = false, hi_exclusive = false;
    // The bounds as written when they are JSON integers (doubles would round 999999999999999999).
    std::optional<int64_t> lo_exact, hi_exact;
  };

  static Bounds bounds(const Json& schema, const std::string& at) {
    Bounds b;
    auto number = [&](const char* key) -> std::optional<double> {
      if (!schema.contains(key)) return std::nullopt;
      const Json& v = schema[key];
      if (v.is_boolean()) return std::nullopt;  // draft 4's exclusive flags, read below
      if (!v.is_number()) refuse(key, at, "must be a number");
      double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxBound)) {
        refuse(key, at, "bounds beyond ±1e18 are not supported");
      }
      return d;
    };
    auto flag = [&](const char* key) {
      return schema.contains(key) && schema[key].is_boolean() && schema[key].get<bool>();
    };
    auto exact = [&](const char* key) -> std::optional<int64_t> {
      if (!schema[key].is_number_integer()) return std::nullopt;
      return schema[key].get<int64_t>();
    };
    b.lo = number("minimum"), b.hi = number("maximum");
    if (b.lo) b.lo_exact = exact("minimum");
    if (b.hi) b.hi_exact = exact("maximum");
    b.lo_exclusive = flag("exclusiveMinimum"), b.hi_exclusive = flag("exclusiveMaximum");
    // 2019+: exclusiveMinimum / exclusiveMaximum are numbers; the tighter bound wins.
    if (auto x = number("exclusiveMinimum"); x && (!b.lo || *x >= *b.lo)) {
      b.lo = x, b.lo_exclusive = true, b.lo_exact = exact("exclusiveMinimum");
    }
    if (auto x = number("exclusiveMaximum"); x && (!b.hi || *x <= *b.hi)) {
      b.hi = x, b.hi_exclusive = true, b.hi_exact = exact("exclusiveMaximum");
    }
    return b;
  }

  // The smallest / largest integer inside the bounds.
  static std::optional<int64_t> integer_lo(const Bounds& b) {
    if (!b.lo) return std::nullopt;
    if (b.lo_exact) return b.lo_exclusive ? *b.lo_exact + 1 : *b.lo_exact;
    return static_cast<int64_t>(b.lo_exclusive ? std::floor(*b.lo) + 1 : std::ceil(*b.lo));
  }
  static std::optional<int64_t> integer_hi(const Bounds& b) {
    if (!b.hi) return std::nullopt;
    if (b.hi_exact) return b.hi_exclusive ? *b.hi_exact - 1 : *b.hi_exact;
    return static_cast<int64_t>(b.hi_exclusive ? std::ceil(*b.hi) - 1 : std::floor(*b.hi));
  }

  static std::string integer_schema(const Json& schema, const std::string& at) {
    Bounds b = bounds(schema, at);
    if (!b.lo && !b.hi) return "jinteger";
    std::string range = integer_range(integer_lo(b), integer_hi(b));
    if (range.empty())
      refuse(b.lo ? "minimum" : "maximum", at, "no integer lies within the bounds");
    return range;
  }

  // Bounded numbers: the integers inside, and decimals k.ddd (value in [k, k+1)) or -k.ddd (in
  // (-(k+1), -k]) where that whole unit interval is inside; no exponents.
  static std::string number_schema(const Json& schema, const std::string& at) {
    Bounds b = bounds(schema, at);
    if (!b.lo && !b.hi) return "jnumber";
    std::optional<int64_t> ilo = integer_lo(b), ihi = integer_hi(b);
    std::vector<std::string> parts;
    if (std::string whole = integer_range(ilo, ihi); !whole.empty()) parts.push_back(whole);
    int64_t pos_from = std::max<int64_t>(ilo.value_or(0), 0);
    std::optional<int64_t> pos_to;
    if (b.hi) pos_to = static_cast<int64_t>(std::floor(*b.hi)) - 1;
    if (!pos_to || pos_from <= *pos_to) {
      std::optional<uint64_t> to;
      if (pos_to) to = static_cast<uint64_t>(*pos_to);
      parts.push_back(unsigned_range(static_cast<uint64_t>(pos_from), to) + " \".\" [0-9]+");
    }
    int64_t neg_from = std::max<int64_t>(ihi ? -*ihi : 0, 0);
    std::optional<int64_t> neg_to;
    if (b.lo) neg_to = static_cast<int64_t>(std::floor(-*b.lo)) - 1;
    if (!neg_to || neg_from <= *neg_to) {
      std::optional<uint64_t> to;
      if (neg_to) to = static_cast<uint64_t>(*neg_to);
      parts.push_back("\"-\" " + unsigned_range(static_cast<uint64_t>(neg_from), to) +
                      " \".\" [0-9]+");
    }
    if (parts.empty()) {
      refuse(b.lo ? "minimum" : "maximum", at,
             "the bounds are narrower than structured output can express (it needs an integer "
             "or a whole unit interval inside them)");
    }
    return gbnf_alternatives(parts);
  }

  std::string object_schema(const Json& schema, const std::string& at, int depth) {
    const Json empty = Json::object();
    const Json& properties = schema.contains("properties") ? schema["properties"] : empty;
    if (!properties.is_object()) refuse("properties", at, "must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      const Json& list = schema["required"];
      if (!list.is_array()) refuse("required", at, "must be an array of property names");
      for (const Json& name : list) {
        if (!name.is_string()) refuse("required", at, "must be an array of property names");
        required.insert(name.get<std::string>());
      }
    }
    const Json* additional =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    bool closed = additional && additional->is_boolean() && !additional->get<bool>();
    // Members in schema order; required names the properties do not list take any value.
    std::vector<std::pair<std::string, std::string>> members;  // written key, value rule
    std::vector<bool> optional;
    for (const auto& [key, value] : properties.items()) {
      members.emplace_back(written(Json(key)),
                           compile(value, child(child(at, "properties"), key), depth + 1));
      optional.push_back(required.count(key) == 0);
    }
    for (const std::string& name : required) {
      if (properties.contains(name)) continue;
      if (closed) refuse("required", at, fmt::format("'{}' is required but not allowed", name));
      std::string value = additional && additional->is_object()
                              ? compile(*additional, child(at, "additionalProperties"), depth + 1)
                              : "jvalue";
      members.emplace_back(written(Json(name)), value);
      optional.push_back(false);
    }
    if (members.empty()) {
      if (closed) return "\"{\" ws \"}\"";
      if (additional && additional->is_object()) {
        std::string value = compile(*additional, child(at, "additionalProperties"), depth + 1);
        std::string member = "jstring ws \":\" ws " + value;
        return define("\"{\" ws (" + member + " (ws \",\" ws " + member + ")*)? ws \"}\"");
      }
      return "jobject";
    }
    // Extra properties are allowed unless closed, but never needed: none are generated.
    return define("\"{\" ws " + member_chain(members, optional) + " ws \"}\"");
  }

  // The members from the first on, each optional one skippable; a comma precedes every member
  // but the first one written. rest(k, first) is a rule per (k, whether nothing is written yet).
  std::string member_chain(const std::vector<std::pair<std::string, std::string>>& members,
                           const std::vector<bool>& optional) {
    std::size_t n = members.size();
    std::vector<std::string> rest_first(n + 1), rest_after(n + 1);
    for (std::size_t k = n; k-- > 0;) {
      std::string member = members[k].first + " ws \":\" ws " + members[k].second;
      auto chain = [&](bool first) {
        std::string written = (first ? "" : "ws \",\" ws ") + member;
        if (!rest_after[k + 1].empty()) written += " " + rest_after[k + 1];
        if (!optional[k]) return written;
        std::string skipped = first ? rest_first[k + 1] : rest_after[k + 1];
        return "(" + written + " | " + (skipped.empty() ? "\"\"" : skipped) + ")";
      };
      rest_after[k] = define(chain(false));
      rest_first[k] = define(chain(true));
    }
    return rest_first[0];
  }

  std::string array_schema(const Json& schema, const std::string& at, int depth) {
    std::vector<std::string> prefix;
    if (schema.contains("prefixItems")) {
      const Json& list = schema["prefixItems"];
      if (!list.is_array()) refuse("prefixItems", at, "must be an array of schemas");
      for (std::size_t i = 0; i < list.size(); ++i) {
        prefix.push_back(
            compile(list[i], child(child(at, "prefixItems"), std::to_string(i)), depth + 1));
      }
    }
    std::optional<int64_t> min_items = count(schema, at, "minItems");
    std::optional<int64_t> max_items = count(schema, at, "maxItems");
    int64_t min = min_items.value_or(0);
    std::optional<int64_t> max = max_items;
    std::string item = "jvalue";
    if (schema.contains("items")) {
      const Json& items = schema["items"];
      if (items.is_array()) {
        refuse("items", at,
               "an array of schemas (draft 4 tuples) is not supported; use prefixItems");
      }
      if (items.is_boolean() && !items.get<bool>()) {
        max = std::min<int64_t>(max.value_or(static_cast<int64_t>(prefix.size())),
                                static_cast<int64_t>(prefix.size()));
      } else {
        item = compile(items, child(at, "items"), depth + 1);
      }
    }
    if (max && *max < min)
      refuse("maxItems", at, "no array length satisfies minItems, maxItems and items");
    if (max && *max == 0) return "\"[\" ws \"]\"";
    auto nth = [&](int64_t k) {
      return k < static_cast<int64_t>(prefix.size()) ? prefix[static_cast<std::size_t>(k)] : item;
    };
    const auto p = static_cast<int64_t>(prefix.size());
    const std::string comma = "ws \",\" ws ";
    // Element 0, then elements 1..min-1 (required: the prefix ones one by one, the rest as one
    // repetition), then optional ones: the remaining prefix ones nested, then free items.
    std::string elements = nth(0);
    for (int64_t k = 1; k < std::min(min, p); ++k) elements += " " + comma + nth(k);
    if (int64_t plain = min - std::max<int64_t>(p, 1); plain > 0) {
      elements += fmt::format(" ({}{}){{{}}}", comma, item, plain);
    }
    const int64_t first_free = std::max<int64_t>({p, min, 1});  // the first index of a free item
    std::string tail;
    if (!max) {
      tail = "(" + comma + item + ")*";
    } else if (*max > first_free) {
      tail = fmt::format("({}{}){{0,{}}}", comma, item, *max - first_free);
    }
    const int64_t optional_prefix_end = max ? std::min(p, *max) : p;
    for (int64_t k = optional_prefix_end - 1; k >= std::max<int64_t>(min, 1); --k) {
      std::string next = comma + nth(k);
      if (!tail.empty()) next += " " + tail;
      tail = "(" + next + ")?";
    }
    if (!tail.empty()) elements += " " + tail;
    if (min == 0) elements = "(" + elements + ")?";
    return define("\"[\" ws " + elements + " ws \"]\"");
  }

  const Json& root_;
  std::string prefix_;
  std::string& rules_;
  bool no_angle_;
  int next_rule_ = 0;
  std::map<std::string, std::string> refs_;
};

}  // namespace

// A refused schema leaves no rules behind (a caller may fall back to another expression).
template <typename Compile>
std::string JsonGrammarWriter::restoring(Compile compile) {
  const std::size_t size = rules_.size();
  try {
    return compile();
  } catch (...) {
    rules_.resize(size);
    throw;
  }
}

std::string JsonGrammarWriter::value(const Json& schema, const std::string& prefix) {
  return restoring([&] { return Compiler(schema, prefix, rules_, no_raw_angle_).value(); });
}

std::string JsonGrammarWriter::raw_string(const Json& schema, const std::string& prefix) {
  return restoring([&] { return Compiler(schema, prefix, rules_, no_raw_angle_).raw_string(); });
}

void JsonGrammarWriter::add_rule(const std::string& name, const std::string& body) {
  rules_ += name + " ::= " + body + "\n";
}

std::string JsonGrammarWriter::finish(const std::string& root) const {
  std::string json_rules(kJsonRules);
  if (no_raw_angle_) {
    // '<' only as the \u003c escape (which jchar's escape branch already allows).
    const std::string plain = "jchar ::= [^\"\\\\\\x00-\\x1F]";
    std::size_t at = json_rules.find(plain);
    json_rules.insert(at + plain.size() - 1, 1, '<');
  }
  json_rules.append(rules_).append("root ::= ").append(root).append("\n");
  return json_rules;
}

std::string json_schema_to_gbnf(const Json& schema) {
  JsonGrammarWriter writer;
  std::string root = writer.value(schema, "s");
  return writer.finish(root);
}

std::string json_object_gbnf() {
  return JsonGrammarWriter().finish("jobject");
}

}  // namespace md::grammar
