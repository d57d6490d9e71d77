// A memory-mapped .safetensors file and zero-copy views of its tensors; weights are read in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/mapped_file.h"
#include "io/safetensors_header.h"

namespace md {

// A tensor's bytes inside a mapped file. It borrows everything (name, shape, bytes, path) from the
// SafetensorsFile or Checkpoint it came from and is valid as long as that object lives.
// `data` has no alignment guarantee beyond 1 byte: the format does not promise any.
struct TensorView {
  std::string_view name;
  DType dtype = DType::kU8;
  std::span<const std::int64_t> shape;
  const std::uint8_t* data = nullptr;
  std::size_t nbytes = 0;
  std::string_view file;  // path of the file that holds the bytes, for messages

  std::uint64_t numel() const { return nbytes / dtype_size(dtype); }
  std::span<const std::uint8_t> bytes() const { return {data, nbytes}; }
  // "name BF16 [4096, 5120] (file path)" for messages and listings.
  std::string describe() const;
};

// Opening maps and validates the whole header (see parse_safetensors_header); a file that opens
// has views that all lie inside the mapping. Not movable, so views stay valid.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::string path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return file_.path(); }
  std::uint64_t file_bytes() const { return file_.size(); }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // In file order (by offset).
  std::span<const TensorView> tensors() const { return views_; }
  // nullptr when the file has no tensor of that name.
  const TensorView* find(std::string_view name) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::vector<TensorView> views_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

}  // namespace md
