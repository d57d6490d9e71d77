// The plain f32 dot product the scalar state kernels share (delta-rule steps, attention over key
// runs): left to right, one rounding per add, so that every caller sums in the same order.
#pragma once

#include <cstdint>

namespace md::kernels {

inline float dot_f32(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace md::kernels
