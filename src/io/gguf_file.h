// A memory-mapped .gguf file: its metadata and zero-copy views of its tensors, read in place.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mapped_file.h"
#include "io/gguf_header.h"

namespace md {

// Opening maps the file and validates the whole header (see parse_gguf_header), so every tensor
// view lies inside the mapping. Not movable, so views stay valid.
class GgufFile {
 public:
  explicit GgufFile(std::string path);
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return file_.path(); }
  std::uint64_t file_bytes() const { return file_.size(); }
  std::uint32_t version() const { return header_.version; }
  std::uint64_t alignment() const { return header_.alignment; }
  std::uint64_t data_offset() const { return header_.data_offset; }

  // In file order.
  std::span<const GgufMetadataEntry> metadata() const { return header_.metadata; }
  // nullptr when the file has no such key.
  const GgufValue* find(std::string_view key) const;

  // Typed lookups. The plain forms throw md::Error naming the file and key when the key is
  // missing; all forms throw when it holds another kind of value (a fallback never hides that).
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  std::int64_t integer(std::string_view key) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const;
  double number(std::string_view key) const;  // any integer or float
  double number_or(std::string_view key, double fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;

  // In file order.
  std::span<const GgufTensor> tensors() const { return header_.tensors; }
  // nullptr when the file has no tensor of that name.
  const GgufTensor* tensor(std::string_view name) const;

  // A listing: version, alignment, every metadata entry and every tensor, one per line.
  std::string describe() const;

 private:
  const GgufValue& require(std::string_view key) const;
  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& value,
                               std::string_view expected) const;

  MappedFile file_;
  GgufHeader header_;
  std::unordered_map<std::string_view, std::size_t> keys_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

}  // namespace md
