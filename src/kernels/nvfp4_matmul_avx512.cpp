// The AVX-512 NVFP4 path (kernels/fp4_tile_avx512.h) with NVFP4's block table: the 8 magnitudes
// times (e4m3 scale) then times the global scale, as the AVX2 table forms them, for two rows'
// blocks at once.
#if defined(__x86_64__)

#include "kernels/fp4_tile_avx512.h"
#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

void nvfp4_matmul_tile_avx512(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  const __m512 magnitudes = fp4_magnitudes_twice();
  const __m512 global = _mm512_set1_ps(w.global_scale);
  fp4_tile_avx512<kNvfp4Block>(
      w, row_begin, row_end, x, x_stride, n_rows, out, [&](int64_t a, int64_t c, int64_t b) {
        const __m512 scales = fp4_halves(_mm256_set1_ps(kE4m3Values[w.row_scales(a)[b]]),
                                         _mm256_set1_ps(kE4m3Values[w.row_scales(c)[b]]));
        return _mm512_mul_ps(_mm512_mul_ps(magnitudes, scales), global);
      });
}

}  // namespace md::kernels

#endif  // __x86_64__
