#include "kernels/gguf_q8_packing.h"

#include <cstring>

namespace md::kernels {

bool gguf_q8_packs(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
}

std::size_t gguf_q8_group_bytes(const GgufMatrix& w) {
  const GgmlTypeInfo& info = ggml_type_info(w.type);
  return static_cast<std::size_t>(w.cols / info.block_elems) * info.block_bytes * kQ8PackRows;
}

std::size_t gguf_q8_packed_bytes(const GgufMatrix& w) {
  return static_cast<std::size_t>((w.rows + kQ8PackRows - 1) / kQ8PackRows) *
         gguf_q8_group_bytes(w);
}

void pack_gguf_q8_rows(const GgufMatrix& w, std::uint8_t* out) {
  const GgmlTypeInfo& info = ggml_type_info(w.type);
  const int scales = w.type == GgmlType::kQ4_1 ? 2 : 1;  // f16 values before the quants
  const std::size_t quant_bytes = info.block_bytes - 2 * static_cast<std::size_t>(scales);
  const int64_t blocks = w.cols / info.block_elems;
  std::memset(out, 0, gguf_q8_packed_bytes(w));
  for (int64_t r = 0; r < w.rows; ++r) {
    std::uint8_t* group = out + static_cast<std::size_t>(r / kQ8PackRows) * gguf_q8_group_bytes(w);
    const auto slot = static_cast<std::size_t>(r % kQ8PackRows);
    for (int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* block = w.row(r) + b * info.block_bytes;
      std::uint8_t* column = group + static_cast<std::size_t>(b) * info.block_bytes * kQ8PackRows;
      for (int s = 0; s < scales; ++s) {
        std::memcpy(column + 2 * (static_cast<std::size_t>(s) * kQ8PackRows + slot), block + 2 * s,
                    2);
      }
      std::memcpy(column + 2 * static_cast<std::size_t>(scales) * kQ8PackRows + slot * quant_bytes,
                  block + 2 * scales, quant_bytes);
    }
  }
}

}  // namespace md::kernels
