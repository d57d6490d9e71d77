#include "kernels/expert_mix.h"

#include "kernels/norms.h"

namespace md::kernels {

void mix_expert_output(float* expert, const float* scale, float eps, float weight, int64_t n,
                       float* mixed) {
  scaled_rms_norm(expert, scale, n, eps);
  for (int64_t i = 0; i < n; ++i) mixed[i] += weight * expert[i];
}

}  // namespace md::kernels
