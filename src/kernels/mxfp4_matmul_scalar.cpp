// The portable MXFP4 path: the documented order (mxfp4_matmul.h) with std::fma, which the AVX2
// path reproduces bit for bit.
#include "kernels/fp4_tile_scalar.h"
#include "kernels/mxfp4.h"
#include "kernels/mxfp4_matmul_kernels.h"

namespace md::kernels {

void mxfp4_matmul_tile_scalar(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  decoded_block_tile<kMxfp4Group>(w.cols, row_begin, row_end, x, x_stride, n_rows, out,
                                  [&](int64_t r, int64_t b, float* block) {
                                    dequantize_mxfp4_row(w.row_codes(r) + b * kMxfp4Group / 2,
                                                         w.row_scales(r) + b, kMxfp4Group, block);
                                  });
}

}  // namespace md::kernels
