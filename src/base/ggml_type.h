// The element and block formats of ggml tensors as GGUF files number them, with their block sizes.
// Lives in base (not io) because both the GGUF reader and the dequantisation kernels need it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace md {

// Numeric ids are the ones written in GGUF tensor infos (gguf-py GGMLQuantizationType); gaps
// (4, 5: the removed Q4_2/Q4_3; 31-33, 36-38: removed experiments) are not valid types.
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

// A type stores `block_elems` consecutive elements of a row in `block_bytes` bytes; plain types
// have blocks of one element.
struct GgmlTypeInfo {
  std::string_view name;  // ggml spelling: "F32", "Q4_K", ...
  std::uint32_t block_elems = 1;
  std::uint32_t block_bytes = 0;
};

// nullopt for ids that are not (or no longer) ggml types.
std::optional<GgmlType> ggml_type_from_id(std::uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
inline std::string_view ggml_type_name(GgmlType type) {
  return ggml_type_info(type).name;
}

}  // namespace md
