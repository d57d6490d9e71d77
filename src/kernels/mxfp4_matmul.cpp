#include "kernels/mxfp4_matmul.h"

#include "kernels/fp4_path.h"
#include "kernels/isa.h"
#include "kernels/mxfp4_matmul_kernels.h"

namespace md::kernels {

namespace {

Mxfp4TileFn active_tile() {
  static const Mxfp4TileFn fn = mxfp4_tile_for(active_fp4_path());
  return fn;
}

}  // namespace

Mxfp4TileFn mxfp4_tile_for(Isa isa) {
#if defined(__x86_64__)
  if (isa >= Isa::kAvx512) return mxfp4_matmul_tile_avx512;
  if (isa >= Isa::kAvx2) return mxfp4_matmul_tile_avx2;
#else
  (void)isa;
#endif
  return mxfp4_matmul_tile_scalar;
}

void mxfp4_matmul_tile(const Mxfp4Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                       int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  active_tile()(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void mxfp4_matmul(const Mxfp4Matrix& w, const float* x, int64_t n_rows, float* y,
                  ThreadPool* pool) {
  const MatmulOut out{y, w.rows, false};
  auto body = [&](int64_t begin, int64_t end) {
    mxfp4_matmul_tile(w, begin, end, x, w.cols, n_rows, out);
  };
  if (pool == nullptr) {
    body(0, w.rows);
  } else {
    pool->parallel_for(w.rows, body);
  }
}

}  // namespace md::kernels
