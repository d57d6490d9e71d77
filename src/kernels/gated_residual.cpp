#include "kernels/gated_residual.h"

namespace md::kernels {

void gated_residual(const float* alpha, const float* beta, const float* branch, int64_t n,
                    float* stream) {
  for (int64_t i = 0; i < n; ++i) stream[i] = alpha[i] * stream[i] + beta[i] * branch[i];
}

}  // namespace md::kernels
