// The per-ISA bodies behind nvfp4_matmul_tile (nvfp4_matmul.h), exposed so that tests can compare
// every path this CPU runs.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/nvfp4_matmul.h"

namespace md::kernels {

using Nvfp4TileFn = void (*)(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t x_stride, int64_t n_rows,
                             const MatmulOut& out);

void nvfp4_matmul_tile_scalar(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);
void nvfp4_matmul_tile_avx2(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// The body a path runs (AVX-512 runs the AVX2 body for now).
Nvfp4TileFn nvfp4_tile_for(Isa isa);

// The lane sum of the documented order.
// Internal linkage: this header is compiled with and without -mavx2, and one linked copy of an
// inline function must not carry VEX code into the scalar path.
static inline float nvfp4_lane_sum(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

}  // namespace md::kernels
