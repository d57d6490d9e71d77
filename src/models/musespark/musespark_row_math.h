// A per-row helper of the Muse Spark reference forward: its norms with a zero-centred scale (held
// as 1 + γ) over rows (the weightless and the scaled-first ones are kernels::rms_norm_unweighted
// and kernels::scaled_rms_norm).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/norms.h"

namespace md::muse {

// y_t = rms(x_t) ⊙ scale for `rows` rows of `width`.
inline void rms_rows(const float* x, const std::vector<float>& scale, int64_t rows, int64_t width,
                     float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    kernels::rms_norm(x + t * width, scale.data(), width, eps, y + t * width);
  }
}

}  // namespace md::muse
