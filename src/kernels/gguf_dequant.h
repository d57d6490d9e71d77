// Dequantisation of GGUF tensor rows (plain floats and the ggml block formats) to f32: the
// reference for the fused GGUF matmul kernels and the loader of small tensors (norms, embeddings).
#pragma once

#include <cstdint>

#include "base/ggml_type.h"

namespace md::kernels {

// Whether dequantize_row handles `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K,
// Q6_K.
bool can_dequantize(GgmlType type);

// Writes the `n` elements stored in `type` at `src` to `dst` as f32. Returns false (and writes
// nothing) when `type` is not supported or `n` is not a whole number of its blocks; loaders
// check both when binding weights, so a decode step never sees false. `src` needs no alignment.
[[nodiscard]] bool dequantize_row(GgmlType type, const std::uint8_t* src, float* dst,
                                  std::int64_t n);

}  // namespace md::kernels
