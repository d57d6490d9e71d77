// Row-wise helpers both block drafters' reference forwards apply to their [rows][hidden]
// activations (a plain bf16-weighted RMSNorm per row, a residual add), written once.
#pragma once

#include <cstdint>

#include "kernels/norms.h"

namespace md {

// y[t] = RMSNorm(x[t]) · weight for `rows` rows of `width` (weight bf16, applied as it is).
inline void normalise_draft_rows(const float* x, const uint16_t* weight, int64_t rows,
                                 int64_t width, float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    kernels::rms_norm(x + t * width, weight, width, eps, kernels::NormWeight::kPlain,
                      y + t * width);
  }
}

// x[i] += delta[i] for i < n.
inline void add_draft_rows(float* x, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += delta[i];
}

}  // namespace md
