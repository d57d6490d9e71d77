#include "kernels/matmul.h"

#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

// Threads split the output rows at multiples of this (a multiple of every path's row block), so
// that no thread starts or ends inside one (results do not depend on the split; speed does).
constexpr int64_t kThreadRowGrain = 48;

const MatmulKernels& active() {
  static const MatmulKernels& kernels = matmul_kernels(active_isa_level());
  return kernels;
}

}  // namespace

const MatmulKernels& matmul_kernels(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512:
      return kMatmulAvx512;
    case Isa::kAvx2:
      return kMatmulAvx2;
    case Isa::kScalar:
      break;
  }
#else
  (void)isa;
#endif
  return kMatmulScalar;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return active().dot(w, x, n);
}

void matmul_tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  active().tile(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void matmul_rows(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, int64_t row_begin,
                 int64_t row_end) {
  active().tile(w, row_begin, row_end, x, w.cols, n_rows, MatmulOut{y, w.rows, false});
}

void matmul(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool) {
  if (pool == nullptr || pool->size() == 1) {
    matmul_rows(w, x, n_rows, y, 0, w.rows);
    return;
  }
  int64_t blocks = (w.rows + kThreadRowGrain - 1) / kThreadRowGrain;
  pool->parallel_for_work(blocks, w.rows * w.cols * n_rows, [&](int64_t begin, int64_t end) {
    matmul_rows(w, x, n_rows, y, begin * kThreadRowGrain,
                end * kThreadRowGrain < w.rows ? end * kThreadRowGrain : w.rows);
  });
}

}  // namespace md::kernels
