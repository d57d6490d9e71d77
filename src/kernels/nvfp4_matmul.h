// Products of NVFP4 weights (kernels/nvfp4.h: e2m1 codes, an e4m3 scale per 16 inputs, one f32
// global scale per matrix) with f32 activations, dequantised in registers: no f32 copy of a row
// exists. Dispatched at run time (kernels/isa.h): AVX-512 (two 8-lane sums per register), AVX2 or
// scalar.
//
// Numerics: every weight is first turned into exactly the f32 dequantize_nvfp4_row gives for it,
// (e2m1 · e4m3) · global (the first product exact, the second rounded once), then multiplied by
// the f32 activation and added to an f32 accumulator with one fma.
// Order, the same on every path, so they agree bitwise: input k of a row goes to lane k mod 8,
// each lane adding its products in increasing k; the lanes are then summed as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). It depends only on the number of columns,
// never on how many activation rows or output rows share a call or how threads split them, so a
// row inside a prefill or a batch equals the same row alone.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace md::kernels {

// [rows][cols] NVFP4 weights (cols a multiple of 16): row r's codes at codes + r · cols/2, its
// scales at scales + r · cols/16.
struct Nvfp4Matrix {
  const std::uint8_t* codes = nullptr;
  const std::uint8_t* scales = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float global_scale = 1.0f;

  const std::uint8_t* row_codes(int64_t r) const { return codes + r * (cols / 2); }
  const std::uint8_t* row_scales(int64_t r) const { return scales + r * (cols / 16); }
};

// For output rows r in [row_begin, row_end) and input rows n in [0, n_rows):
// out.y[n·out.y_stride + r] (+)= Σ_c W[r][c] · x[n·x_stride + c].
void nvfp4_matmul_tile(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                       int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// y[n][r] = Σ_c W[r][c] · x[n][c] (x: [n_rows][cols], y: [n_rows][rows]), spread over `pool`
// (may be null).
void nvfp4_matmul(const Nvfp4Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

}  // namespace md::kernels
