#include "io/gguf_value.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <utility>

namespace md {
namespace {

constexpr std::array<std::string_view, 13> kTypeNames = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

// Long strings (chat templates) are cut in listings; the value itself is kept whole.
std::string shorten(const std::string& text) {
  constexpr std::size_t kMax = 60;
  if (text.size() <= kMax) return fmt::format("\"{}\"", text);
  return fmt::format("\"{}...\" ({} bytes)", text.substr(0, kMax), text.size());
}

}  // namespace

std::optional<GgufValueType> gguf_value_type_from_id(std::uint32_t id) {
  if (id >= kTypeNames.size()) return std::nullopt;
  return static_cast<GgufValueType>(id);
}

std::string_view gguf_value_type_name(GgufValueType type) {
  auto id = static_cast<std::uint32_t>(type);
  return id < kTypeNames.size() ? kTypeNames[id] : "unknown";
}

GgufValue GgufValue::unsigned_integer(GgufValueType type, std::uint64_t value) {
  GgufValue v;
  v.type_ = type;
  v.value_ = value;
  return v;
}

GgufValue GgufValue::signed_integer(GgufValueType type, std::int64_t value) {
  GgufValue v;
  v.type_ = type;
  v.value_ = value;
  return v;
}

GgufValue GgufValue::real(GgufValueType type, double value) {
  GgufValue v;
  v.type_ = type;
  v.value_ = value;
  return v;
}

GgufValue GgufValue::boolean(bool value) {
  GgufValue v;
  v.type_ = GgufValueType::kBool;
  v.value_ = value;
  return v;
}

GgufValue GgufValue::string(std::string value) {
  GgufValue v;
  v.type_ = GgufValueType::kString;
  v.value_ = std::move(value);
  return v;
}

GgufValue GgufValue::array(GgufValueType element_type, Array values) {
  GgufValue v;
  v.type_ = GgufValueType::kArray;
  v.element_type_ = element_type;
  v.value_ = std::move(values);
  return v;
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<std::uint64_t>(value_) ||
         std::holds_alternative<std::int64_t>(value_);
}

std::optional<std::int64_t> GgufValue::as_int64() const {
  if (const auto* u = std::get_if<std::uint64_t>(&value_)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return {};
    return static_cast<std::int64_t>(*u);
  }
  if (const auto* i = std::get_if<std::int64_t>(&value_)) return *i;
  return std::nullopt;
}

std::optional<double> GgufValue::as_double() const {
  if (const auto* d = std::get_if<double>(&value_)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&value_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<std::int64_t>(&value_)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&value_)) return *b;
  return std::nullopt;
}

const std::string* GgufValue::as_string() const {
  return std::get_if<std::string>(&value_);
}

const GgufValue::Array* GgufValue::as_array() const {
  return std::get_if<Array>(&value_);
}

std::string GgufValue::describe() const {
  std::string_view name = gguf_value_type_name(type_);
  if (const auto* u = std::get_if<std::uint64_t>(&value_)) return fmt::format("{} {}", name, *u);
  if (const auto* i = std::get_if<std::int64_t>(&value_)) return fmt::format("{} {}", name, *i);
  if (const auto* d = std::get_if<double>(&value_)) return fmt::format("{} {}", name, *d);
  if (const auto* b = std::get_if<bool>(&value_)) return fmt::format("bool {}", *b);
  if (const auto* s = std::get_if<std::string>(&value_)) return "string " + shorten(*s);
  const Array& array = std::get<Array>(value_);
  return fmt::format("array<{}>[{}]", gguf_value_type_name(element_type_), array.size());
}

}  // namespace md
