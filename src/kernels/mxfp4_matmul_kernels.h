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

// The body a path runs. AVX-512 CPUs run the AVX2 body: no AVX-512 body has been written yet
// (this project's development machine cannot execute one, and none goes in unexecuted).
Mxfp4TileFn mxfp4_tile_for(Isa isa);

}  // namespace md::kernels
