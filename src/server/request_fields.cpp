#include "server/request_fields.h"

#include <charconv>
#include <cmath>

#include "server/api_error.h"

namespace md::server {
namespace {

// 2^63 as a double: the first value past int64's range. Every double below it (and at or above
// -2^63) converts to int64 exactly, since a double that large has no fractional bits.
constexpr double kTwoTo63 = 9223372036854775808.0;

IntegerRead read_float_integer(double d) {
  if (!std::isfinite(d)) return {IntegerStatus::kOutOfRange};  // 1e400 parses as infinity
  if (std::trunc(d) != d) return {IntegerStatus::kNotInteger};
  // A JSON number outside int64 arrives as a double; -2^63 itself as a double means the literal
  // was out of range (an in-range -9223372036854775808 parses as an integer).
  if (d <= -kTwoTo63 || d >= kTwoTo63) return {IntegerStatus::kOutOfRange};
  return {IntegerStatus::kOk, static_cast<int64_t>(d)};
}

}  // namespace

IntegerRead read_integer(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer:
      return {IntegerStatus::kOk, value.get<int64_t>()};
    case Json::value_t::number_unsigned: {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return {IntegerStatus::kOutOfRange};
      }
      return {IntegerStatus::kOk, static_cast<int64_t>(u)};
    }
    case Json::value_t::number_float:
      return read_float_integer(value.get<double>());
    default:
      return {IntegerStatus::kNotInteger};
  }
}

const std::string& as_string(const Json& value, std::string_view param) {
  if (!value.is_string()) throw invalid_type(param, type_phrase::kString);
  return value.get_ref<const std::string&>();
}

bool as_bool(const Json& value, std::string_view param) {
  if (!value.is_boolean()) throw invalid_type(param, type_phrase::kBoolean);
  return value.get<bool>();
}

int64_t as_integer(const Json& value, std::string_view param, const IntegerRule& rule) {
  const IntegerRead read = read_integer(value);
  if (read.status == IntegerStatus::kNotInteger) throw invalid_type(param, type_phrase::kInteger);
  if (read.status == IntegerStatus::kOutOfRange || read.value < rule.min || read.value > rule.max) {
    throw invalid_value(param, rule.text);
  }
  return read.value;
}

double as_number(const Json& value, std::string_view param) {
  // nlohmann's is_number() is false for booleans, so true/false never pass as 1/0.
  if (!value.is_number()) throw invalid_type(param, type_phrase::kNumber);
  return value.get<double>();
}

double as_number(const Json& value, std::string_view param, const NumberRule& rule) {
  auto within = [&rule](double d) {
    const bool above_min = rule.min_exclusive ? d > rule.min : d >= rule.min;
    return above_min && d <= rule.max;  // written so that an infinite value (1e400) fails too
  };
  const double d = as_number(value, param);
  if (!within(d)) throw invalid_value(param, rule.text);
  // The engine holds these as float: check the value it will see (1e-46 is 0 as a float, which
  // is outside "greater than 0"). The bounds are well inside float's range, so the conversion
  // of a value within them is defined.
  const double as_float = static_cast<float>(d);
  if (!within(as_float)) throw invalid_value(param, rule.text);
  return as_float;
}

const Json& as_object(const Json& value, std::string_view param) {
  if (!value.is_object()) throw invalid_type(param, type_phrase::kObject);
  return value;
}

const Json& as_array(const Json& value, std::string_view param) {
  if (!value.is_array()) throw invalid_type(param, type_phrase::kArray);
  return value;
}

std::optional<int64_t> parse_decimal(std::string_view text) {
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  // from_chars accepts a leading '-' but not '+' or spaces, which is the strictness wanted here.
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

const Json* FieldReader::find(std::string_view key) const {
  const auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> FieldReader::string(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  return as_string(*value, path(key));
}

std::optional<bool> FieldReader::boolean(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  return as_bool(*value, path(key));
}

std::optional<int64_t> FieldReader::integer(std::string_view key, const IntegerRule& rule) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  return as_integer(*value, path(key), rule);
}

std::optional<double> FieldReader::number(std::string_view key, const NumberRule& rule) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  return as_number(*value, path(key), rule);
}

const Json* FieldReader::object(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) return nullptr;
  return &as_object(*value, path(key));
}

const Json* FieldReader::array(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) return nullptr;
  return &as_array(*value, path(key));
}

const Json& FieldReader::required(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) throw missing_required(path(key));
  return *value;
}

}  // namespace md::server
