// The per-ISA bodies behind nvfp4_matmul_tile (nvfp4_matmul.h), exposed so that tests can compare
// every path this CPU runs.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/lane_sum8.h"
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

void nvfp4_matmul_tile_avx512(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);

// The body a path runs; NVFP4 products take the path fp4_path.h chooses.
Nvfp4TileFn nvfp4_tile_for(Isa isa);

}  // namespace md::kernels
