// The forward substitution of the WY form that both chunked delta rules share (one decay per
// head, gated_delta_rule.cpp; one per key channel, kda_rule.cpp): rows t of U (dv wide) and W
// (dk wide) hold their right-hand sides (β v_t and the decayed β k_t); subtracting A[t][j] times
// every finished earlier row j solves (I + A) U = …, (I + A) W = … row by row. Both callers are
// compiled with -ffp-contract=off, so this inline function rounds alike in each.
#pragma once

#include <cstdint>

namespace md::kernels {

// a: the strictly lower-triangular n × n A; u, w: the chunk's rows, row t being finished here.
inline void subtract_earlier_rows(const float* a, int64_t n, int64_t t, float* u, int64_t dv,
                                  float* w, int64_t dk) {
  float* u_t = u + t * dv;
  float* w_t = w + t * dk;
  for (int64_t j = 0; j < t; ++j) {
    const float coef = a[t * n + j];
    const float* u_j = u + j * dv;
    const float* w_j = w + j * dk;
    for (int64_t i = 0; i < dv; ++i) u_t[i] -= coef * u_j[i];
    for (int64_t i = 0; i < dk; ++i) w_t[i] -= coef * w_j[i];
  }
}

}  // namespace md::kernels
