// The per-ISA bodies behind int8_matmul_tile (int8_matmul.h), exposed so that tests can compare
// every path this CPU runs.
#pragma once

#include <cstdint>

#include "kernels/int8_matmul.h"
#include "kernels/isa.h"

namespace md::kernels {

using Int8TileFn = void (*)(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out);

void int8_matmul_tile_scalar(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t x_stride, int64_t n_rows,
                             const MatmulOut& out);
void int8_matmul_tile_avx2(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end,
                           const float* x, int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// The body a path runs (AVX-512 runs the AVX2 body for now).
Int8TileFn int8_tile_for(Isa isa);

}  // namespace md::kernels
