#include "kernels/gguf_matmul_q8.h"

namespace md::kernels {

bool gguf_q8_supports(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0;
}

const GgufQ8Kernels& gguf_q8_kernels(Isa isa) {
#if defined(__x86_64__)
  if (isa != Isa::kScalar && has_f16c()) return kGgufQ8Avx2;
#else
  (void)isa;
#endif
  return kGgufQ8Scalar;
}

namespace {

const GgufQ8Kernels& active() {
  static const GgufQ8Kernels& kernels = gguf_q8_kernels(active_isa_level());
  return kernels;
}

}  // namespace

void quantize_q8_row(const float* x, int64_t cols, std::int8_t* qs, float* d, float* s) {
  active().quantize(x, cols, qs, d, s);
}

void gguf_q8_tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const Q8Rows& x,
                  const MatmulOut& out) {
  active().tile(w, row_begin, row_end, x, out);
}

}  // namespace md::kernels
