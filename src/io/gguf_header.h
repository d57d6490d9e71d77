// Parsing and validation of a whole GGUF header (versions 2 and 3, little-endian): metadata,
// tensor infos and the placement of every tensor's bytes. Works on bytes so that tests and
// fuzzers need no files; GgufFile applies it to a memory mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/ggml_type.h"
#include "io/gguf_value.h"

namespace md {

// A tensor's bytes inside the parsed buffer; valid as long as that buffer is.
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  // ggml order: dims[0] is the contiguous row length (the reverse of numpy/torch shapes).
  std::vector<std::int64_t> dims;
  std::uint64_t offset = 0;  // absolute byte offset in the file
  const std::uint8_t* data = nullptr;
  std::size_t nbytes = 0;

  std::int64_t numel() const;
  std::int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  std::int64_t rows() const;  // numel / row_length (1 for scalars, 0 for empty tensors)
  std::span<const std::uint8_t> bytes() const { return {data, nbytes}; }
  // "blk.0.attn_q.weight Q4_K [4096, 4096] at 1234567 (9437184 bytes)" for listings.
  std::string describe() const;
};

struct GgufMetadataEntry {
  std::string key;
  GgufValue value;
};

struct GgufHeader {
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;             // general.alignment, or the format's default
  std::uint64_t data_offset = 0;            // start of the tensor data section (aligned)
  std::vector<GgufMetadataEntry> metadata;  // in file order
  std::vector<GgufTensor> tensors;          // in file order
};

inline constexpr std::uint64_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;
// Deeper nesting than any real file uses; bounds the parser's recursion.
inline constexpr int kGgufMaxArrayDepth = 8;

// Throws md::Error naming `path` and the offending key or tensor when `file` is not a valid
// GGUF file. On success every tensor lies inside `file`, aligned, without overlaps.
GgufHeader parse_gguf_header(std::span<const std::uint8_t> file, std::string_view path);

}  // namespace md
