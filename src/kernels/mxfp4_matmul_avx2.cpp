// The AVX2 MXFP4 path (kernels/fp4_tile_avx2.h) with MXFP4's group table: the 8 magnitudes times
// the E8M0 scale, a power of two, so the table is exactly dequantize_mxfp4_row's values.
#if defined(__x86_64__)

#include "kernels/fp4_tile_avx2.h"
#include "kernels/mxfp4.h"
#include "kernels/mxfp4_matmul_kernels.h"

namespace md::kernels {

void mxfp4_matmul_tile_avx2(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows,
                            const MatmulOut& out) {
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  fp4_tile_avx2<kMxfp4Group>(
      w, row_begin, row_end, x, x_stride, n_rows, out, [&](int64_t r, int64_t b) {
        return _mm256_mul_ps(magnitudes, _mm256_set1_ps(kE8m0Values[w.row_scales(r)[b]]));
      });
}

}  // namespace md::kernels

#endif  // __x86_64__
