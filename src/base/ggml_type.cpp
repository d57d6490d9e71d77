#include "base/ggml_type.h"

#include <array>

namespace md {
namespace {

constexpr std::uint32_t kSuperBlock = 256;  // QK_K: the element count of every k-quant block

struct Entry {
  GgmlType type;
  GgmlTypeInfo info;
};

// Byte counts follow the block structs: f16 scales are 2 bytes, nibble arrays n/2, and so on.
constexpr std::array kTypes = {
    Entry{GgmlType::kF32, {"F32", 1, 4}},
    Entry{GgmlType::kF16, {"F16", 1, 2}},
    Entry{GgmlType::kQ4_0, {"Q4_0", 32, 2 + 16}},
    Entry{GgmlType::kQ4_1, {"Q4_1", 32, 2 + 2 + 16}},
    Entry{GgmlType::kQ5_0, {"Q5_0", 32, 2 + 4 + 16}},
    Entry{GgmlType::kQ5_1, {"Q5_1", 32, 2 + 2 + 4 + 16}},
    Entry{GgmlType::kQ8_0, {"Q8_0", 32, 2 + 32}},
    Entry{GgmlType::kQ8_1, {"Q8_1", 32, 4 + 4 + 32}},
    Entry{GgmlType::kQ2_K, {"Q2_K", kSuperBlock, 2 + 2 + kSuperBlock / 16 + kSuperBlock / 4}},
    Entry{GgmlType::kQ3_K, {"Q3_K", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 8 + 12}},
    Entry{GgmlType::kQ4_K, {"Q4_K", kSuperBlock, 2 + 2 + kSuperBlock / 2 + 12}},
    Entry{GgmlType::kQ5_K, {"Q5_K", kSuperBlock, 2 + 2 + kSuperBlock / 2 + kSuperBlock / 8 + 12}},
    Entry{GgmlType::kQ6_K,
          {"Q6_K", kSuperBlock, 2 + kSuperBlock / 2 + kSuperBlock / 4 + kSuperBlock / 16}},
    Entry{GgmlType::kQ8_K, {"Q8_K", kSuperBlock, 4 + kSuperBlock + kSuperBlock / 8}},
    Entry{GgmlType::kIQ2_XXS, {"IQ2_XXS", kSuperBlock, 2 + kSuperBlock / 4}},
    Entry{GgmlType::kIQ2_XS, {"IQ2_XS", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 32}},
    Entry{GgmlType::kIQ3_XXS, {"IQ3_XXS", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 8}},
    Entry{GgmlType::kIQ1_S, {"IQ1_S", kSuperBlock, 2 + kSuperBlock / 8 + kSuperBlock / 16}},
    Entry{GgmlType::kIQ4_NL, {"IQ4_NL", 32, 2 + 16}},
    Entry{GgmlType::kIQ3_S,
          {"IQ3_S", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 8 + kSuperBlock / 32 + 4}},
    Entry{GgmlType::kIQ2_S, {"IQ2_S", kSuperBlock, 2 + kSuperBlock / 4 + kSuperBlock / 16}},
    Entry{GgmlType::kIQ4_XS, {"IQ4_XS", kSuperBlock, 2 + 2 + kSuperBlock / 2 + kSuperBlock / 64}},
    Entry{GgmlType::kI8, {"I8", 1, 1}},
    Entry{GgmlType::kI16, {"I16", 1, 2}},
    Entry{GgmlType::kI32, {"I32", 1, 4}},
    Entry{GgmlType::kI64, {"I64", 1, 8}},
    Entry{GgmlType::kF64, {"F64", 1, 8}},
    Entry{GgmlType::kIQ1_M,
          {"IQ1_M", kSuperBlock, kSuperBlock / 8 + kSuperBlock / 16 + kSuperBlock / 32}},
    Entry{GgmlType::kBF16, {"BF16", 1, 2}},
    Entry{GgmlType::kTQ1_0, {"TQ1_0", kSuperBlock, 2 + 4 * 13}},
    Entry{GgmlType::kTQ2_0, {"TQ2_0", kSuperBlock, 2 + 64}},
    Entry{GgmlType::kMXFP4, {"MXFP4", 32, 1 + 16}},
};

const Entry* find_entry(std::uint32_t id) {
  for (const Entry& entry : kTypes) {
    if (static_cast<std::uint32_t>(entry.type) == id) return &entry;
  }
  return nullptr;
}

}  // namespace

std::optional<GgmlType> ggml_type_from_id(std::uint32_t id) {
  const Entry* entry = find_entry(id);
  if (entry == nullptr) return std::nullopt;
  return entry->type;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  // Every enumerator has an entry (ggml_type_test checks it), so this never dereferences null.
  return find_entry(static_cast<std::uint32_t>(type))->info;
}

}  // namespace md
