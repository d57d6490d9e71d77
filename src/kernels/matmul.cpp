#include "kernels/matmul.h"

#include <fmt/format.h>

#include "base/error.h"
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"

namespace md::kernels {

namespace {

// Threads split the output rows at multiples of this (a multiple of every path's row block), so
// that no thread starts or ends inside one (results do not depend on the split; speed does).
constexpr int64_t kThreadRowGrain = 48;

const MatmulKernels& f32_inputs() {
  static const MatmulKernels& kernels = matmul_kernels(active_isa_level());
  return kernels;
}

// The kernels of `w`'s input mode (checked when the model tagged it: check_matmul_inputs).
const MatmulKernels& kernels_for(const Bf16Matrix& w) {
#if defined(__x86_64__)
  if (w.inputs == MatmulInputs::kBf16) return kMatmulAvx512Bf16;
#endif
  return f32_inputs();
}

}  // namespace

std::string bf16_inputs_refusal(Isa active, bool cpu_has_avx512_bf16) {
#if defined(__x86_64__)
  if (!cpu_has_avx512_bf16) {
    return "bf16 matmul inputs need AVX512-BF16 (vdpbf16ps), which this CPU lacks";
  }
  if (active != Isa::kAvx512) {
    return fmt::format(
        "bf16 matmul inputs need the avx512 kernels, but this process runs the {} ones "
        "(MEGADECODE_ISA)",
        isa_name(active));
  }
  return "";
#else
  (void)active;
  (void)cpu_has_avx512_bf16;
  return "bf16 matmul inputs need AVX512-BF16, an x86-64 extension";
#endif
}

void check_matmul_inputs(MatmulInputs inputs) {
  if (inputs != MatmulInputs::kBf16) return;
  std::string refusal = bf16_inputs_refusal(active_isa_level(), has_avx512_bf16());
  if (!refusal.empty()) throw Error(refusal);
}

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
  return f32_inputs().dot(w, x, n);
}

void matmul_tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  kernels_for(w).tile(w, row_begin, row_end, x, x_stride, n_rows, out);
}

void matmul_rows(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, int64_t row_begin,
                 int64_t row_end) {
  kernels_for(w).tile(w, row_begin, row_end, x, w.cols, n_rows, MatmulOut{y, w.rows, false});
}

void matmul(const Bf16Matrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool) {
  const MatmulKernels& kernels = kernels_for(w);
  const MatmulOut out{y, w.rows, false};
  if (pool == nullptr || pool->size() == 1) {
    kernels.tile(w, 0, w.rows, x, w.cols, n_rows, out);
    return;
  }
  int64_t blocks = (w.rows + kThreadRowGrain - 1) / kThreadRowGrain;
  pool->parallel_for_work(blocks, w.rows * w.cols * n_rows, [&](int64_t begin, int64_t end) {
    kernels.tile(w, begin * kThreadRowGrain,
                 end * kThreadRowGrain < w.rows ? end * kThreadRowGrain : w.rows, x, w.cols, n_rows,
                 out);
  });
}

}  // namespace md::kernels
