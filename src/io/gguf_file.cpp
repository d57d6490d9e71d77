#include "io/gguf_file.h"

#include <fmt/format.h>

#include <utility>

#include "base/error.h"

namespace md {

GgufFile::GgufFile(std::string path)
    : file_(std::move(path)), header_(parse_gguf_header(file_.bytes(), file_.path())) {
  keys_.reserve(header_.metadata.size());
  for (std::size_t i = 0; i < header_.metadata.size(); ++i) {
    keys_.emplace(header_.metadata[i].key, i);
  }
  tensor_index_.reserve(header_.tensors.size());
  for (std::size_t i = 0; i < header_.tensors.size(); ++i) {
    tensor_index_.emplace(header_.tensors[i].name, i);
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : &header_.metadata[it->second].value;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &header_.tensors[it->second];
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail("{}: metadata key '{}' is missing", path(), key);
  return *value;
}

void GgufFile::wrong_type(std::string_view key, const GgufValue& value,
                          std::string_view expected) const {
  fail("{}: metadata key '{}' is {}, expected {}", path(), key, value.describe(), expected);
}

std::string GgufFile::string(std::string_view key) const {
  const GgufValue& value = require(key);
  if (const std::string* text = value.as_string()) return *text;
  wrong_type(key, value, "a string");
}

std::string GgufFile::string_or(std::string_view key, std::string fallback) const {
  return find(key) == nullptr ? std::move(fallback) : string(key);
}

std::int64_t GgufFile::integer(std::string_view key) const {
  const GgufValue& value = require(key);
  if (auto number = value.as_int64()) return *number;
  wrong_type(key, value, "an integer (that fits an int64)");
}

std::int64_t GgufFile::integer_or(std::string_view key, std::int64_t fallback) const {
  return find(key) == nullptr ? fallback : integer(key);
}

double GgufFile::number(std::string_view key) const {
  const GgufValue& value = require(key);
  if (auto number = value.as_double()) return *number;
  wrong_type(key, value, "a number");
}

double GgufFile::number_or(std::string_view key, double fallback) const {
  return find(key) == nullptr ? fallback : number(key);
}

bool GgufFile::boolean_or(std::string_view key, bool fallback) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return fallback;
  if (auto flag = value->as_bool()) return *flag;
  wrong_type(key, *value, "a bool");
}

std::string GgufFile::describe() const {
  std::string out =
      fmt::format("{}: GGUF v{}, alignment {}, {} metadata entries, {} tensors\n", path(),
                  version(), alignment(), header_.metadata.size(), header_.tensors.size());
  for (const GgufMetadataEntry& entry : header_.metadata) {
    out += fmt::format("  {} = {}\n", entry.key, entry.value.describe());
  }
  for (const GgufTensor& t : header_.tensors) out += fmt::format("  {}\n", t.describe());
  return out;
}

}  // namespace md
