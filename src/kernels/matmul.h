// Bf16-weight × f32-activation products with f32 accumulation, dispatched at run time to the
// best vector path of the CPU (kernels/isa.h).
//
// Determinism: for a given path, every output element is reduced in one fixed order that depends
// only on the number of columns, not on how many input rows are processed together, which other
// output rows share the call, or how the work is split across threads. A row computed inside a
// prefill or verify block is therefore bitwise equal to the same row computed alone (spec §10.5).
// Different paths (scalar, AVX2, AVX-512) may differ from each other in the last bits; the opt-in
// bf16-input path (a matrix tagged MatmulInputs::kBf16, bf16_matrix.h) differs from them by the
// rounding of its inputs.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/bf16_matrix.h"

namespace md::kernels {

// Where matmul_tile writes: y[n * y_stride + r] for input row n and output row r, overwritten or
// (accumulate) added to, e.g. a residual stream.
struct MatmulOut {
  float* y = nullptr;
  int64_t y_stride = 0;
  bool accumulate = false;
};

// Throws md::Error when `inputs` cannot run in this process: kBf16 needs AVX512-BF16 and the
// avx512 path (kernels/isa.h, MEGADECODE_ISA). Models check their option with it before loading.
void check_matmul_inputs(MatmulInputs inputs);

// Σ_i bf16(w[i]) · x[i] in the same order as one output of matmul_tile with n columns and f32
// inputs: attention's q·k over a bf16 KV cache uses it (MatmulInputs is about weight products).
float dot_bf16(const uint16_t* w, const float* x, int64_t n);

// For output rows r in [row_begin, row_end) of W and input rows n in [0, n_rows), with
// y_nr = y[n * y_stride + r]:  y_nr = (accumulate ? y_nr : 0) + Σ_c W[r][c] · x[n * x_stride + c]
// Each weight is read from memory once for all input rows. Pointers need only their element
// alignment (weights are read in place from mmap'd checkpoints).
void matmul_tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// y[n][r] = Σ_c W[r][c] · x[n][c] for `n_rows` input rows (x: [n_rows][W.cols], y:
// [n_rows][W.rows], both contiguous). `pool` may be null (single thread).
void matmul(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

// Same, restricted to output rows [row_begin, row_end) (y keeps the full W.rows stride).
void matmul_rows(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, int64_t row_begin,
                 int64_t row_end);

}  // namespace md::kernels
