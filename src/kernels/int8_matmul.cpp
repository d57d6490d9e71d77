#include "kernels/int8_matmul.h"

#include "kernels/int8_matmul_kernels.h"
#include "kernels/isa.h"

namespace md::kernels {

namespace {

Int8TileFn active_tile() {
  static const Int8TileFn fn = int8_tile_for(active_isa_level());
  return fn;
}

}  // namespace

Int8TileFn int8_tile_for(Isa isa) {
#if defined(__x86_64__)
  if (isa >= Isa::kAvx2) return int8_matmul_tile_avx2;
#else
  (void)isa;
#endif
  return int8_matmul_tile_scalar;
}

void int8_matmul_tile(const Int8RowsMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  active_tile()(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void int8_matmul(const Int8RowsMatrix& w, const float* x, int64_t n_rows, float* y,
                 ThreadPool* pool) {
  const MatmulOut out{y, w.rows, false};
  auto body = [&](int64_t begin, int64_t end) {
    int8_matmul_tile(w, begin, end, x, w.cols, n_rows, out);
  };
  if (pool == nullptr) {
    body(0, w.rows);
  } else {
    pool->parallel_for(w.rows, body);
  }
}

}  // namespace md::kernels
