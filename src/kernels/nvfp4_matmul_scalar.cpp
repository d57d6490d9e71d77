// The portable NVFP4 path: the documented order (nvfp4_matmul.h) with std::fma, which the vector
// paths reproduce bit for bit.
#include "kernels/fp4_tile_scalar.h"
#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

void nvfp4_matmul_tile_scalar(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  decoded_block_tile<kNvfp4Block>(w.cols, row_begin, row_end, x, x_stride, n_rows, out,
                                  [&](int64_t r, int64_t b, float* block) {
                                    dequantize_nvfp4_row(w.row_codes(r) + b * kNvfp4Block / 2,
                                                         w.row_scales(r) + b, kNvfp4Block,
                                                         w.global_scale, block);
                                  });
}

}  // namespace md::kernels
