// Products of MXFP4 weights (kernels/mxfp4.h: e2m1 codes, an E8M0 scale per 32 inputs) with f32
// activations, dequantised in registers: no f32 copy of a row exists. Dispatched at run time
// (kernels/isa.h): AVX2 (also on AVX-512 CPUs) or scalar.
//
// Numerics: every weight is exactly the f32 dequantize_mxfp4_row gives for it (a power-of-two
// scale loses nothing), multiplied by the f32 activation and added to an f32 accumulator with one
// fma, in the order of the other 8-lane kernels (kernels/lane_sum8.h): input k of a row to lane
// k mod 8, each lane in increasing k, then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
// The order depends only on the number of columns, never on how many activation rows or output
// rows share a call or how threads split them, so a row inside a batch equals the same row alone,
// and every path gives the same bits.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace md::kernels {

// [rows][cols] MXFP4 weights (cols a multiple of 32): row r's codes at codes + r · cols/2, its
// scales at scales + r · cols/32.
struct Mxfp4Matrix {
  const std::uint8_t* codes = nullptr;
  const std::uint8_t* scales = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  const std::uint8_t* row_codes(int64_t r) const { return codes + r * (cols / 2); }
  const std::uint8_t* row_scales(int64_t r) const { return scales + r * (cols / 32); }
};

// For output rows r in [row_begin, row_end) and input rows n in [0, n_rows):
// out.y[n·out.y_stride + r] (+)= Σ_c W[r][c] · x[n·x_stride + c].
void mxfp4_matmul_tile(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                       int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// y[n][r] = Σ_c W[r][c] · x[n][c] (x: [n_rows][cols], y: [n_rows][rows]), spread over `pool`
// (may be null).
void mxfp4_matmul(const Mxfp4Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

}  // namespace md::kernels
