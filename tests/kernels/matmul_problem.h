// A random bf16-weight product for the matmul tests, deliberately misaligned: the weights start
// one bf16 past an allocation (as a tensor in an mmap'd safetensors file may), the inputs one
// float past one, and both have padded strides.
#pragma once

#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/bf16_matrix.h"

namespace md::test {

struct MatmulProblem {
  int64_t rows, cols, n, x_stride;
  std::vector<uint16_t> w_storage;
  std::vector<float> x_storage;
  MatmulProblem(int64_t r, int64_t c, int64_t batch, uint64_t seed)
      : rows(r),
        cols(c),
        n(batch),
        x_stride(c + 3),
        w_storage(random_bf16(static_cast<std::size_t>(r * c + 1), seed)),
        x_storage(random_floats(static_cast<std::size_t>(batch * x_stride + 1), seed + 1)) {}
  kernels::Bf16Matrix matrix() const { return {w_storage.data() + 1, rows, cols}; }
  const float* x() const { return x_storage.data() + 1; }
  double weight(int64_t r, int64_t c) const {
    return widen(w_storage[static_cast<std::size_t>(1 + r * cols + c)]);
  }
  double input(int64_t n_row, int64_t c) const { return x()[n_row * x_stride + c]; }
};

}  // namespace md::test
