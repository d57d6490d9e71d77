// The AVX2 NVFP4 path (kernels/fp4_tile_avx2.h) with NVFP4's block table: the 8 magnitudes times
// (e4m3 scale) then times the global scale, exactly dequantize_nvfp4_row's values, the sign being
// symmetric.
#if defined(__x86_64__)

#include "kernels/fp4_tile_avx2.h"
#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

void nvfp4_matmul_tile_avx2(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                            const float* x, int64_t x_stride, int64_t n_rows,
                            const MatmulOut& out) {
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  const __m256 global = _mm256_set1_ps(w.global_scale);
  fp4_tile_avx2<kNvfp4Block>(w, row_begin, row_end, x, x_stride, n_rows, out,
                             [&](int64_t r, int64_t b) {
                               const __m256 scale = _mm256_set1_ps(kE4m3Values[w.row_scales(r)[b]]);
                               return _mm256_mul_ps(_mm256_mul_ps(magnitudes, scale), global);
                             });
}

}  // namespace md::kernels

#endif  // __x86_64__
