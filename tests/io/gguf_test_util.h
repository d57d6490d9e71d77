// A tiny GGUF writer for tests: encodes metadata and tensor infos exactly as told, so tests can
// build valid files and also write every kind of lie (wrong counts, offsets, types).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace md::testing {

// Little-endian encoders.
inline void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

struct GgufTestTensor {
  std::string name;
  std::uint32_t type = 0;  // ggml type id
  std::vector<std::uint64_t> dims;
  std::vector<std::uint8_t> data;
  std::optional<std::uint64_t> offset =
      std::nullopt;  // relative to the data section; default: next aligned
};

class GgufBuilder {
 public:
  std::uint32_t version = 3;
  std::uint32_t alignment = 32;  // where tensors are placed; add general.alignment to declare it
  std::optional<std::uint64_t> tensor_count;  // lies about the counts when set
  std::optional<std::uint64_t> kv_count;

  // One entry whose value (type id and encoded bytes) the test encodes itself.
  GgufBuilder& raw(const std::string& key, std::uint32_t type, std::vector<std::uint8_t> value) {
    std::vector<std::uint8_t> entry;
    put_string(entry, key);
    put_u32(entry, type);
    entry.insert(entry.end(), value.begin(), value.end());
    entries_.push_back(std::move(entry));
    return *this;
  }
  GgufBuilder& u32(const std::string& key, std::uint32_t v) {
    std::vector<std::uint8_t> bytes;
    put_u32(bytes, v);
    return raw(key, 4, bytes);
  }
  GgufBuilder& string(const std::string& key, const std::string& v) {
    std::vector<std::uint8_t> bytes;
    put_string(bytes, v);
    return raw(key, 8, bytes);
  }
  GgufBuilder& tensor(GgufTestTensor t) {
    tensors_.push_back(std::move(t));
    return *this;
  }

  std::vector<std::uint8_t> build() const {
    std::vector<std::uint8_t> out = {'G', 'G', 'U', 'F'};
    put_u32(out, version);
    put_u64(out, tensor_count.value_or(tensors_.size()));
    put_u64(out, kv_count.value_or(entries_.size()));
    for (const auto& entry : entries_) out.insert(out.end(), entry.begin(), entry.end());
    std::vector<std::uint64_t> offsets;
    std::uint64_t next = 0;
    for (const GgufTestTensor& t : tensors_) {
      std::uint64_t offset = t.offset.value_or(next);
      offsets.push_back(offset);
      next = align(std::max(next, offset + t.data.size()));
      put_string(out, t.name);
      put_u32(out, static_cast<std::uint32_t>(t.dims.size()));
      for (std::uint64_t d : t.dims) put_u64(out, d);
      put_u32(out, t.type);
      put_u64(out, offset);
    }
    if (tensors_.empty()) return out;
    out.resize(align(out.size()), 0);
    const std::size_t data_start = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const auto& data = tensors_[i].data;
      if (data.empty()) continue;  // tests that lie about offsets place no bytes
      if (data_start + offsets[i] + data.size() > out.size()) {
        out.resize(data_start + offsets[i] + data.size(), 0);
      }
      std::copy(data.begin(), data.end(),
                out.begin() + static_cast<std::ptrdiff_t>(data_start + offsets[i]));
    }
    return out;
  }

 private:
  std::uint64_t align(std::uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }

  std::vector<std::vector<std::uint8_t>> entries_;
  std::vector<GgufTestTensor> tensors_;
};

}  // namespace md::testing
