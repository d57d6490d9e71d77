// Tensors of a GGUF file bound by name for a model family: matrices in place in the mapping (in
// their block formats), vectors dequantised to f32 once. Errors name the file, the tensor and the
// family that needs it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_file.h"
#include "kernels/gguf_matmul.h"

namespace md {

// A [rows][cols] matrix (ggml order: cols first), or a one-dimensional tensor of `cols` when rows
// is 1. Throws md::Error when it is missing, shaped otherwise, or in a format the GGUF kernels
// cannot both multiply and dequantise.
kernels::GgufMatrix bind_gguf_matrix(const GgufFile& file, const std::string& name, int64_t rows,
                                     int64_t cols, std::string_view family);

// The [count][rows][cols] stack `name` (ggml order: cols, rows, count), e.g. a MoE layer's
// experts, as `count` matrices of [rows][cols] read in place. Errors as bind_gguf_matrix's.
std::vector<kernels::GgufMatrix> bind_gguf_stack(const GgufFile& file, const std::string& name,
                                                 int64_t count, int64_t rows, int64_t cols,
                                                 std::string_view family);

// A vector of n values as f32.
std::vector<float> bind_gguf_vector(const GgufFile& file, const std::string& name, int64_t n,
                                    std::string_view family);

// A small [rows][cols] table (ggml order: cols first) as f32, e.g. conv taps: needs only a format
// that dequantises, whatever the GEMV kernels accept.
std::vector<float> bind_gguf_table(const GgufFile& file, const std::string& name, int64_t rows,
                                   int64_t cols, std::string_view family);

}  // namespace md
