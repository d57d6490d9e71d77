#include "models/common/config_reader.h"

#include <cmath>
#include <limits>

#include "base/error.h"

namespace md {

namespace {

constexpr std::size_t kMaxValueText = 120;

std::string element_path(const std::string& path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

}  // namespace

std::string config_value_text(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > kMaxValueText) text = text.substr(0, kMaxValueText - 3) + "...";
  return text;
}

std::string_view json_kind_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "null";
  }
}

ConfigReader::ConfigReader(std::string file, const nlohmann::json& object, std::string model,
                           std::string path)
    : file_(std::move(file)), object_(&object), model_(std::move(model)), path_(std::move(path)) {
  if (!object.is_object()) {
    fail("{}: {} = {}: wrong type: expected object, got {}", file_,
         path_.empty() ? "top level" : path_, config_value_text(object), json_kind_name(object));
  }
}

std::string ConfigReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

const nlohmann::json* ConfigReader::find(std::string_view key) const {
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& ConfigReader::require(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) missing(key, fmt::format("required by {}", model_));
  return *value;
}

void ConfigReader::wrong_type(const std::string& path, const nlohmann::json& value,
                              std::string_view expected) const {
  fail("{}: {} = {}: wrong type: expected {}, got {}", file_, path, config_value_text(value),
       expected, json_kind_name(value));
}

int64_t ConfigReader::to_integer(const std::string& path, const nlohmann::json& value) const {
  if (value.is_number_unsigned()) {
    auto unsigned_value = value.get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("{}: {} = {}: out of range", file_, path, config_value_text(value));
    }
    return static_cast<int64_t>(unsigned_value);
  }
  if (!value.is_number_integer()) wrong_type(path, value, "integer");
  return value.get<int64_t>();
}

double ConfigReader::to_number(const std::string& path, const nlohmann::json& value) const {
  if (!value.is_number()) wrong_type(path, value, "number");
  double number = value.get<double>();
  if (!std::isfinite(number))
    fail("{}: {} = {}: not finite", file_, path, config_value_text(value));
  return number;
}

const nlohmann::json& ConfigReader::to_array(const std::string& path,
                                             const nlohmann::json& value) const {
  if (!value.is_array()) wrong_type(path, value, "array");
  return value;
}

int64_t ConfigReader::integer(std::string_view key) const {
  return to_integer(path_of(key), require(key));
}

int64_t ConfigReader::integer_or(std::string_view key, int64_t fallback) const {
  return optional_integer(key).value_or(fallback);
}

std::optional<int64_t> ConfigReader::optional_integer(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return std::nullopt;
  return to_integer(path_of(key), *value);
}

int64_t ConfigReader::positive(std::string_view key) const {
  int64_t value = integer(key);
  if (value <= 0) reject(key, "must be positive");
  if (value > kMaxSize) reject(key, fmt::format("implausibly large (limit {})", kMaxSize));
  return value;
}

double ConfigReader::number(std::string_view key) const {
  return to_number(path_of(key), require(key));
}

double ConfigReader::number_or(std::string_view key, double fallback) const {
  const nlohmann::json* value = find(key);
  return value == nullptr ? fallback : to_number(path_of(key), *value);
}

double ConfigReader::positive_number(std::string_view key) const {
  double value = number(key);
  if (!(value > 0)) reject(key, "must be positive");
  return value;
}

bool ConfigReader::boolean(std::string_view key) const {
  const nlohmann::json& value = require(key);
  if (!value.is_boolean()) wrong_type(path_of(key), value, "boolean");
  return value.get<bool>();
}

bool ConfigReader::boolean_or(std::string_view key, bool fallback) const {
  return has(key) ? boolean(key) : fallback;
}

std::string ConfigReader::string(std::string_view key) const {
  const nlohmann::json& value = require(key);
  if (!value.is_string()) wrong_type(path_of(key), value, "string");
  return value.get<std::string>();
}

std::string ConfigReader::string_or(std::string_view key, std::string_view fallback) const {
  return has(key) ? string(key) : std::string(fallback);
}

std::vector<int64_t> ConfigReader::integer_list(std::string_view key) const {
  std::string path = path_of(key);
  const nlohmann::json& array = to_array(path, require(key));
  std::vector<int64_t> values;
  values.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    values.push_back(to_integer(element_path(path, i), array[i]));
  }
  return values;
}

std::vector<double> ConfigReader::number_list(std::string_view key) const {
  std::string path = path_of(key);
  const nlohmann::json& array = to_array(path, require(key));
  std::vector<double> values;
  values.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    values.push_back(to_number(element_path(path, i), array[i]));
  }
  return values;
}

std::vector<std::string> ConfigReader::string_list(std::string_view key) const {
  std::string path = path_of(key);
  const nlohmann::json& array = to_array(path, require(key));
  std::vector<std::string> values;
  values.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string()) wrong_type(element_path(path, i), array[i], "string");
    values.push_back(array[i].get<std::string>());
  }
  return values;
}

std::vector<int64_t> ConfigReader::token_ids(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) return {};
  if (value->is_array()) return integer_list(key);
  return {to_integer(path_of(key), *value)};
}

ConfigReader ConfigReader::object(std::string_view key) const {
  const nlohmann::json& value = require(key);
  if (!value.is_object()) wrong_type(path_of(key), value, "object");
  return ConfigReader(file_, value, model_, path_of(key));
}

std::optional<ConfigReader> ConfigReader::optional_object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return object(key);
}

void ConfigReader::expect(std::string_view key, const nlohmann::json& required,
                          Absent absent) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr) {
    if (absent == Absent::kAccept) return;
    missing(key, fmt::format("{} needs {}", model_, required.dump()));
  }
  bool same_kind = required.is_number() ? value->is_number() : value->type() == required.type();
  if (!same_kind) wrong_type(path_of(key), *value, json_kind_name(required));
  if (*value != required)
    reject(key, fmt::format("unsupported ({} needs {})", model_, required.dump()));
}

void ConfigReader::forbid(std::string_view key, std::string_view why) const {
  if (has(key)) reject(key, fmt::format("unsupported ({})", why));
}

void ConfigReader::reject(std::string_view key, std::string_view reason) const {
  const nlohmann::json* value = find(key);
  fail("{}: {} = {}: {}", file_, path_of(key), value ? config_value_text(*value) : "null", reason);
}

void ConfigReader::reject_element(std::string_view key, std::size_t index,
                                  std::string_view reason) const {
  const nlohmann::json& array = require(key);
  std::string value = index < array.size() ? config_value_text(array[index]) : "(none)";
  fail("{}: {} = {}: {}", file_, element_path(path_of(key), index), value, reason);
}

void ConfigReader::missing(std::string_view key, std::string_view reason) const {
  fail("{}: {}: missing ({})", file_, path_of(key), reason);
}

}  // namespace md
