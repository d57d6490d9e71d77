// The AVX-512 MXFP4 path (kernels/fp4_tile_avx512.h) with MXFP4's group table: the 8 magnitudes
// times the E8M0 scale, a power of two, as the AVX2 table forms them, for two rows' groups at
// once.
#if defined(__x86_64__)

#include "kernels/fp4_tile_avx512.h"
#include "kernels/mxfp4.h"
#include "kernels/mxfp4_matmul_kernels.h"

namespace md::kernels {

void mxfp4_matmul_tile_avx512(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t x_stride, int64_t n_rows,
                              const MatmulOut& out) {
  const __m512 magnitudes = fp4_magnitudes_twice();
  fp4_tile_avx512<kMxfp4Group>(
      w, row_begin, row_end, x, x_stride, n_rows, out, [&](int64_t a, int64_t c, int64_t b) {
        return _mm512_mul_ps(magnitudes,
                             fp4_halves(_mm256_set1_ps(kE8m0Values[w.row_scales(a)[b]]),
                                        _mm256_set1_ps(kE8m0Values[w.row_scales(c)[b]])));
      });
}

}  // namespace md::kernels

#endif  // __x86_64__
