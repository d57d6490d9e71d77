// What both chunked delta rules (one decay per head, gated_delta_rule.cpp; one per key channel,
// kda_rule.cpp) share of the WY form: the forward substitution and the state's products. Both
// callers are compiled with -ffp-contract=off; the functions have internal linkage, so no copy
// built with other flags can stand in for them.
#pragma once

#include <cstdint>

#include "kernels/dot_f32.h"

namespace md::kernels {

// Rows t of U (dv wide) and W (dk wide) hold their right-hand sides (β v_t and the decayed β k_t);
// subtracting A[t][j] times every finished earlier row j solves (I + A) U = …, (I + A) W = … row
// by row. a: the strictly lower-triangular n × n A.
static inline void subtract_earlier_rows(const float* a, int64_t n, int64_t t, float* u, int64_t dv,
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

// y[v] = Σ_c S[v][c] x[c]: the state ([dv][dk], a value row contiguous) times a key vector.
static inline void state_times(const float* state, int64_t dv, int64_t dk, const float* x,
                               float* y) {
  for (int64_t v = 0; v < dv; ++v) y[v] = dot_f32(state + v * dk, x, dk);
}

// U_t ← U_t − S0 W_t for the chunk's n rows: the corrected values (each token's δ). `tmp` holds
// dv floats.
static inline void subtract_state_products(const float* state, int64_t dv, int64_t dk, int64_t n,
                                           const float* w, float* u, float* tmp) {
  for (int64_t t = 0; t < n; ++t) {
    state_times(state, dv, dk, w + t * dk, tmp);
    float* u_t = u + t * dv;
    for (int64_t i = 0; i < dv; ++i) u_t[i] -= tmp[i];
  }
}

}  // namespace md::kernels
