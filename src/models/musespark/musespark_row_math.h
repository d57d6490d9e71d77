// Small per-row helpers of the Muse Spark reference forward: its norms come weightless or with a
// zero-centred scale (held as 1 + γ); kernels::scaled_rms_norm is the one scaled before
// normalising.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/norms.h"

namespace md::muse {

// y = x / sqrt(mean(x²) + eps). y may alias x.
inline void rms_unweighted(const float* x, int64_t n, float eps, float* y) {
  kernels::rms_norm(x, static_cast<const uint16_t*>(nullptr), n, eps, kernels::NormWeight::kPlain,
                    y);
}

// y_t = rms(x_t) ⊙ scale for `rows` rows of `width`.
inline void rms_rows(const float* x, const std::vector<float>& scale, int64_t rows, int64_t width,
                     float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    kernels::rms_norm(x + t * width, scale.data(), width, eps, y + t * width);
  }
}

}  // namespace md::muse
