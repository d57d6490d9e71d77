// A read-only memory mapping of a whole file: checkpoints are read in place, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace md {

class MappedFile {
 public:
  // Maps `path` read-only; throws md::Error naming the path on failure. Empty files are allowed.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace md
