#include "kernels/nvfp4_matmul.h"

#include "kernels/fp4_path.h"
#include "kernels/isa.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace md::kernels {

namespace {

Nvfp4TileFn active_tile() {
  static const Nvfp4TileFn fn = nvfp4_tile_for(active_fp4_path());
  return fn;
}

}  // namespace

Nvfp4TileFn nvfp4_tile_for(Isa isa) {
#if defined(__x86_64__)
  if (isa >= Isa::kAvx512) return nvfp4_matmul_tile_avx512;
  if (isa >= Isa::kAvx2) return nvfp4_matmul_tile_avx2;
#else
  (void)isa;
#endif
  return nvfp4_matmul_tile_scalar;
}

void nvfp4_matmul_tile(const Nvfp4Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                       int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  active_tile()(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void nvfp4_matmul(const Nvfp4Matrix& w, const float* x, int64_t n_rows, float* y,
                  ThreadPool* pool) {
  const MatmulOut out{y, w.rows, false};
  auto body = [&](int64_t begin, int64_t end) {
    nvfp4_matmul_tile(w, begin, end, x, w.cols, n_rows, out);
  };
  if (pool == nullptr) {
    body(0, w.rows);
  } else {
    pool->parallel_for(w.rows, body);
  }
}

}  // namespace md::kernels
