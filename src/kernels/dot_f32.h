// The plain f32 dot product the scalar state kernels share (delta-rule steps, attention over key
// runs), so that every caller sums in the same order. The order: sixteen running sums, element i
// added (after its own rounded product) to sum i mod 16 in increasing i, then the sums folded as a
// tree (sum j += sum j+8, then j+4, j+2, j+1). Sixteen independent chains instead of one let the
// compiler keep them in vector registers (four SSE or one AVX-512 register, no ISA dispatch needed:
// the order is the same whatever it emits), which makes the delta rule's per-row dots about ten
// times faster than a single left-to-right chain whose every add waits for the previous one.
#pragma once

#include <cstdint>

namespace md::kernels {

inline constexpr int kDotF32Lanes = 16;

// Internal linkage: translation units built with and without -ffp-contract=off include this, and
// one linked copy of an inline function must not carry contracted (fma) arithmetic into the others.
static inline float dot_f32(const float* a, const float* b, int64_t n) {
  float sums[kDotF32Lanes] = {};
  int64_t i = 0;
  for (; i + kDotF32Lanes <= n; i += kDotF32Lanes) {
    for (int j = 0; j < kDotF32Lanes; ++j) sums[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i + j < n; ++j) sums[j] += a[i + j] * b[i + j];
  for (int width = kDotF32Lanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) sums[j] += sums[j + width];
  }
  return sums[0];
}

}  // namespace md::kernels
