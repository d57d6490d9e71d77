// Typed, validated access to one JSON object of a model config file (config.json and friends).
// Every error names the file, the dotted field path and the offending value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace md {

class ConfigReader {
 public:
  // `model` names who imposes the rules ("qwen3_5"), so refusals read "(qwen3_5 needs ...)".
  // `object` must outlive the reader and every reader derived from it.
  ConfigReader(std::string file, const nlohmann::json& object, std::string model,
               std::string path = "");
  ConfigReader(std::string file, const nlohmann::json&& object, std::string model,
               std::string path = "") = delete;

  const std::string& file() const { return file_; }
  const std::string& model() const { return model_; }
  const nlohmann::json& json() const { return *object_; }
  // Dotted path of this object inside the file; empty at the top level.
  const std::string& path() const { return path_; }
  // "text_config.num_key_value_heads" for key "num_key_value_heads" under text_config.
  std::string path_of(std::string_view key) const;

  // Null counts as absent: Hugging Face writes `null` for unset optional fields.
  const nlohmann::json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  int64_t integer(std::string_view key) const;
  int64_t integer_or(std::string_view key, int64_t fallback) const;
  std::optional<int64_t> optional_integer(std::string_view key) const;
  // Required integer in 1..kMaxSize: sizes beyond it are corrupt configs, and refusing them
  // keeps size arithmetic far from overflow.
  static constexpr int64_t kMaxSize = int64_t{1} << 26;
  int64_t positive(std::string_view key) const;
  double number(std::string_view key) const;
  double number_or(std::string_view key, double fallback) const;
  double positive_number(std::string_view key) const;
  bool boolean(std::string_view key) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string_view fallback) const;

  std::vector<int64_t> integer_list(std::string_view key) const;
  std::vector<double> number_list(std::string_view key) const;
  std::vector<std::string> string_list(std::string_view key) const;
  // Token id fields hold one id or a list of ids; absent gives an empty list.
  std::vector<int64_t> token_ids(std::string_view key) const;

  ConfigReader object(std::string_view key) const;
  std::optional<ConfigReader> optional_object(std::string_view key) const;

  enum class Absent { kAccept, kRefuse };
  // Refuses the config unless `key` equals `required` (numbers compare by value). An absent key
  // is accepted when the Hugging Face default equals the required value.
  void expect(std::string_view key, const nlohmann::json& required,
              Absent absent = Absent::kAccept) const;
  // Refuses the config when `key` is present (and not null).
  void forbid(std::string_view key, std::string_view why) const;

  // "file: path = value: reason".
  [[noreturn]] void reject(std::string_view key, std::string_view reason) const;
  [[noreturn]] void reject_element(std::string_view key, std::size_t index,
                                   std::string_view reason) const;
  // "file: path: missing (reason)".
  [[noreturn]] void missing(std::string_view key, std::string_view reason) const;

 private:
  const nlohmann::json& require(std::string_view key) const;
  [[noreturn]] void wrong_type(const std::string& path, const nlohmann::json& value,
                               std::string_view expected) const;
  int64_t to_integer(const std::string& path, const nlohmann::json& value) const;
  double to_number(const std::string& path, const nlohmann::json& value) const;
  const nlohmann::json& to_array(const std::string& path, const nlohmann::json& value) const;

  std::string file_;
  const nlohmann::json* object_;
  std::string model_;
  std::string path_;
};

// Short JSON rendering of a value for error messages (long values are elided).
std::string config_value_text(const nlohmann::json& value);
// "integer", "number", "string", "boolean", "array", "object" or "null".
std::string_view json_kind_name(const nlohmann::json& value);

}  // namespace md
