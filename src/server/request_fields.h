// Typed reads of request fields under the JSON input conventions of docs/openai-api.md §0: null
// means absent; integers are numbers without a fractional part (10, 10.0, 1e1, not 10.5);
// booleans are never numbers and numbers never booleans; strings are never coerced. Every
// failure throws the ApiError of §2.1 naming the value's JSON path.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace md::server {

using Json = nlohmann::ordered_json;

// Type phrases of §2.1 (the text after "expected").
namespace type_phrase {
inline constexpr std::string_view kString = "a string";
inline constexpr std::string_view kInteger = "an integer";
inline constexpr std::string_view kNumber = "a number";
inline constexpr std::string_view kBoolean = "a boolean";
inline constexpr std::string_view kObject = "an object";
inline constexpr std::string_view kArray = "an array";
}  // namespace type_phrase

// Inclusive bounds of an integer field and the <rule> of its invalid_value message.
struct IntegerRule {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string_view text;
};

// Bounds of a number field; `min_exclusive` for rules like "greater than 0".
struct NumberRule {
  double min;
  double max;
  std::string_view text;
  bool min_exclusive = false;
};

// Result of reading a JSON value as an integer, before any field's own bounds apply.
enum class IntegerStatus {
  kOk,
  kNotInteger,  // not a number, or a number with a fractional part: a type error
  kOutOfRange,  // integral, but outside int64 (e.g. 9223372036854775808 or 1e400): a value error
};
struct IntegerRead {
  IntegerStatus status;
  int64_t value = 0;
};
IntegerRead read_integer(const Json& value);

// Value-level checks. `param` is the value's JSON path, used in the error.
const std::string& as_string(const Json& value, std::string_view param);
bool as_bool(const Json& value, std::string_view param);
int64_t as_integer(const Json& value, std::string_view param, const IntegerRule& rule);
double as_number(const Json& value, std::string_view param);
// Within the rule both as given and as the float the engine holds; returns the float's value.
double as_number(const Json& value, std::string_view param, const NumberRule& rule);
const Json& as_object(const Json& value, std::string_view param);
const Json& as_array(const Json& value, std::string_view param);

// Parses a decimal integer such as a logit_bias key ("50256", "-1"); nullopt for anything else,
// including values outside int64.
std::optional<int64_t> parse_decimal(std::string_view text);

// Reads the fields of one JSON object. `prefix` turns a key into its JSON path: "" at the top
// level, "stream_options." or "messages[2]." inside.
class FieldReader {
 public:
  explicit FieldReader(const Json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  // The value at `key`, or nullptr when it is absent or null (§0: null means absent).
  const Json* find(std::string_view key) const;
  // True when `key` holds a non-null value.
  bool has(std::string_view key) const { return find(key) != nullptr; }
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }

  std::optional<std::string> string(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key, const IntegerRule& rule) const;
  std::optional<double> number(std::string_view key, const NumberRule& rule) const;
  const Json* object(std::string_view key) const;
  const Json* array(std::string_view key) const;

  // The value at `key`; missing_required when it is absent or null.
  const Json& required(std::string_view key) const;

 private:
  const Json& object_;
  std::string prefix_;
};

}  // namespace md::server
