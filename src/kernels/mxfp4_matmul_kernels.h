// The per-ISA bodies behind mxfp4_matmul_tile (mxfp4_matmul.h), exposed so that tests can compare
// every path this CPU runs.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/mxfp4_matmul.h"

namespace md::kernels {

using Mxfp4TileFn = void (*)(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t x_stride, int64_t n_rows,
                             const MatmulOut& out);

void mxfp4_matmul_tile_scalar(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);
void mxfp4_matmul_tile_avx2(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out);
void mxfp4_matmul_tile_avx512(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out);

// The body a path runs. MXFP4 products take the path fp4_path.h chooses, as NVFP4's do.
Mxfp4TileFn mxfp4_tile_for(Isa isa);

}  // namespace md::kernels
