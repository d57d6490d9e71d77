// The safetensors header (8-byte length + JSON) parsed and fully validated from bytes in memory,
// so that mapped files, tests and fuzzers share one parser and never touch the filesystem here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"

namespace md {

// The reference implementation's bound; a larger length is corruption, not a real header.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One tensor entry after validation. Offsets are absolute within the file, so `offset + nbytes`
// never exceeds the file size the header was validated against.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<std::int64_t> shape;  // every dimension is >= 0; empty for a scalar
  std::uint64_t offset = 0;
  std::uint64_t nbytes = 0;  // == product(shape) * dtype_size(dtype), checked without overflow
};

struct SafetensorsHeader {
  std::uint64_t json_bytes = 0;                 // length of the JSON text (including any padding)
  std::uint64_t data_offset = 0;                // 8 + json_bytes: where the data area begins
  std::uint64_t data_bytes = 0;                 // file size - data_offset
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" object
  std::vector<SafetensorsEntry> tensors;        // sorted by offset (then name)
};

// Validates the whole header of a safetensors file whose complete contents are `file`:
// the length field (at least 8 bytes of file, length within the file and the limit), a JSON object
// without duplicate keys, "__metadata__" as a string-to-string map (or null), and for every tensor
// exactly the keys dtype/shape/data_offsets with a known dtype, non-negative integer dimensions,
// offsets inside the data area whose span equals the shape's byte size, and no two non-empty
// tensors overlapping. Gaps between tensors and bytes after the last one are tolerated. Throws
// md::Error naming `origin` (a path, for messages) and the tensor concerned.
SafetensorsHeader parse_safetensors_header(std::span<const std::uint8_t> file,
                                           std::string_view origin);

}  // namespace md
