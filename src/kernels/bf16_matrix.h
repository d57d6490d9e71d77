// A row-major bf16 weight matrix read in place ([out][in], y = W·x, as PyTorch Linear stores it).
#pragma once

#include <cstdint>

namespace md::kernels {

// What products with bf16 weights multiply them with. kF32 (the default): the f32 activations as
// they are. kBf16 (opt-in, as llama.cpp's bf16 vec_dot_type): the activations rounded to bf16
// (nearest even), which lets AVX512-BF16's vdpbf16ps do twice the products per instruction; the
// results differ from kF32 by that rounding (at most 2^-8 of each input) and keep the same
// determinism contract (each mode's order depends only on the column count). A property of each
// matrix, so that it is a model's option: a model tags its matrices when it loads.
// kQ8 (opt-in, as llama.cpp's q8 vec_dot_type for its integer blocks) is the same idea for GGUF
// Q4_0, Q4_1 and Q8_0 weights: the activations quantised to int8 in blocks of 32, so that the
// products are integer dot products (kernels/gguf_matmul_q8.h); bf16 matrices read it as kF32.
enum class MatmulInputs : uint8_t { kF32, kBf16, kQ8 };

struct Bf16Matrix {
  const uint16_t* data = nullptr;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs
  MatmulInputs inputs = MatmulInputs::kF32;

  const uint16_t* row(int64_t r) const { return data + r * cols; }
};

}  // namespace md::kernels
