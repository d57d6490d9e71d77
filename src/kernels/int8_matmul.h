// Products of int8-per-row weights (kernels/int8_rows.h) with f32 activations. Dispatched at run
// time (kernels/isa.h): AVX2 (which the AVX-512 level also runs for now) or scalar.
//
// Numerics: y = scale[r] · Σ_c f32(q[r][c]) · x[c], the sum in f32 with one fma per weight (the
// int8 → f32 conversion is exact) and the scale applied once to the sum, as §7 of the Muse spec
// says. Order, the same on every path, so they agree bitwise: lane_sum8.h's (input c to lane
// c mod 8, lanes summed in its documented order). It depends only on the number of columns, never
// on how many activation rows or output rows share a call or how threads split them.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/int8_rows.h"
#include "kernels/matmul.h"

namespace md::kernels {

// For output rows r in [row_begin, row_end) and input rows n in [0, n_rows):
// out.y[n·out.y_stride + r] (+)= scale[r] · Σ_c q[r][c] · x[n·x_stride + c]. cols must be a
// multiple of 8 (the quantiser's callers check).
void int8_matmul_tile(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// y[n][r] for all rows (x: [n_rows][cols], y: [n_rows][rows]), spread over `pool` (may be null).
void int8_matmul(const Int8RowsMatrix& w, const float* x, int64_t n_rows, float* y,
                 ThreadPool* pool);

}  // namespace md::kernels
