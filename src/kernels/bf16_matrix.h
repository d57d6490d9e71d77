// A row-major bf16 weight matrix read in place ([out][in], y = W·x, as PyTorch Linear stores it).
#pragma once

#include <cstdint>

namespace md::kernels {

struct Bf16Matrix {
  const uint16_t* data = nullptr;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs

  const uint16_t* row(int64_t r) const { return data + r * cols; }
};

}  // namespace md::kernels
