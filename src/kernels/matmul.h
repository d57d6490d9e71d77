// Bf16-weight × f32-activation products with f32 accumulation.
//
// Every output element is reduced in one fixed order that does not depend on how many input rows
// are processed together or how the work is split across threads, so a row computed inside a
// prefill or verify block is bitwise equal to the same row computed alone (spec §10.5).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/bf16_matrix.h"

namespace md::kernels {

// Σ_i bf16(w[i]) · x[i] in the fixed lane order shared by every kernel here.
float dot_bf16(const uint16_t* w, const float* x, int64_t n);

// y[n][r] = Σ_c W[r][c] · x[n][c] for `n_rows` input rows (x: [n_rows][W.cols], y:
// [n_rows][W.rows], both contiguous). `pool` may be null (single thread).
void matmul(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

// Same, restricted to output rows [row_begin, row_end) (y keeps the full W.rows stride).
void matmul_rows(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, int64_t row_begin,
                 int64_t row_end);

}  // namespace md::kernels
