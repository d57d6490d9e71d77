// One GGUF metadata value: a scalar, a string or a typed array of values (arrays may nest).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace md {

// The numeric ids are the ones written in the file (gguf-py GGUFValueType).
enum class GgufValueType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::optional<GgufValueType> gguf_value_type_from_id(std::uint32_t id);
// "u32", "string", "array", ... for messages.
std::string_view gguf_value_type_name(GgufValueType type);

class GgufValue {
 public:
  using Array = std::vector<GgufValue>;

  static GgufValue unsigned_integer(GgufValueType type, std::uint64_t value);
  static GgufValue signed_integer(GgufValueType type, std::int64_t value);
  static GgufValue real(GgufValueType type, double value);
  static GgufValue boolean(bool value);
  static GgufValue string(std::string value);
  // `element_type` is what the file declares, kept so that empty arrays still have one.
  static GgufValue array(GgufValueType element_type, Array values);

  GgufValueType type() const { return type_; }
  GgufValueType element_type() const { return element_type_; }  // arrays only

  bool is_integer() const;
  bool is_number() const { return is_integer() || is_real(); }
  bool is_real() const { return type_ == GgufValueType::kF32 || type_ == GgufValueType::kF64; }

  // nullopt when the value is not of that kind (or, for integers, does not fit an int64).
  std::optional<std::int64_t> as_int64() const;
  std::optional<double> as_double() const;  // any number
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const Array* as_array() const;

  // "u32 151936", "string \"llama\"", "array<string>[32000]" for listings.
  std::string describe() const;

 private:
  GgufValueType type_ = GgufValueType::kU8;
  GgufValueType element_type_ = GgufValueType::kU8;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string, Array> value_;
};

}  // namespace md
