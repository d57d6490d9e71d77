#include "kernels/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/delta_rule_chunk.h"
#include "kernels/dot_f32.h"
#include "kernels/isa.h"

namespace md::kernels {

namespace {

constexpr int64_t kPrefetchRows = 16;
constexpr int64_t kFloatsPerLine = 64 / sizeof(float);

// Scratch of one chunk: the strictly lower-triangular A and the two substitution results.
struct ChunkScratch {
  std::vector<float> cum;  // c_t, cumulative log-decay
  std::vector<float> a;    // A[t][s], n × n
  std::vector<float> u;    // U_t (V-vectors), n × dv
  std::vector<float> w;    // W_t (K-vectors), n × dk
  std::vector<float> tmp;  // one V-vector
};

void chunk(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in, int64_t t0, int64_t n,
           float* out, int64_t out_stride, ChunkScratch& s) {
  auto q = [&](int64_t t) { return in.q + (t0 + t) * in.qk_stride; };
  auto k = [&](int64_t t) { return in.k + (t0 + t) * in.qk_stride; };
  auto v = [&](int64_t t) { return in.v + (t0 + t) * in.v_stride; };
  float running = 0;
  for (int64_t t = 0; t < n; ++t) s.cum[t] = running += in.g[t0 + t];
  // A[t][s] = β_t (k_t·k_s) e^{c_t − c_s} for s < t; exponents are differences (≤ 0).
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < t; ++j) {
      s.a[t * n + j] = in.beta[t0 + t] * dot_f32(k(t), k(j), dk) * std::exp(s.cum[t] - s.cum[j]);
    }
  }
  // Forward substitution of (I + A) U0 = β v and (I + A) W = β e^{c} k.
  for (int64_t t = 0; t < n; ++t) {
    float* u_t = s.u.data() + t * dv;
    float* w_t = s.w.data() + t * dk;
    float beta = in.beta[t0 + t];
    float beta_decay = beta * std::exp(s.cum[t]);
    for (int64_t i = 0; i < dv; ++i) u_t[i] = beta * v(t)[i];
    for (int64_t i = 0; i < dk; ++i) w_t[i] = beta_decay * k(t)[i];
    subtract_earlier_rows(s.a.data(), n, t, s.u.data(), dv, s.w.data(), dk);
  }
  // U_t = U0_t − S0 W_t (the chunk's corrected values).
  subtract_state_products(state, dv, dk, n, s.w.data(), s.u.data(), s.tmp.data());
  // O_t = e^{c_t} S0 q_t + Σ_{s≤t} e^{c_t − c_s} (q_t·k_s) U_s.
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + (t0 + t) * out_stride;
    state_times(state, dv, dk, q(t), o);
    float decay = std::exp(s.cum[t]);
    for (int64_t i = 0; i < dv; ++i) o[i] *= decay;
    for (int64_t j = 0; j <= t; ++j) {
      float coef = dot_f32(q(t), k(j), dk) * std::exp(s.cum[t] - s.cum[j]);
      const float* u_j = s.u.data() + j * dv;
      for (int64_t i = 0; i < dv; ++i) o[i] += coef * u_j[i];
    }
  }
  // S ← e^{c_last} S + Σ_s e^{c_last − c_s} U_s ⊗ k_s.
  float last = s.cum[n - 1];
  float decay = std::exp(last);
  for (int64_t i = 0; i < dv * dk; ++i) state[i] *= decay;
  for (int64_t j = 0; j < n; ++j) {
    float coef = std::exp(last - s.cum[j]);
    const float* u_j = s.u.data() + j * dv;
    const float* k_j = k(j);
    for (int64_t r = 0; r < dv; ++r) {
      float scaled = coef * u_j[r];
      float* row = state + r * dk;
      for (int64_t c = 0; c < dk; ++c) row[c] += scaled * k_j[c];
    }
  }
}

}  // namespace

// A state row depends on no other row, so each row goes through decay, update and read-out while
// it is in L1: one pass over the state (read and written once) instead of three.
void gated_delta_step_portable(float* state, int64_t dv, int64_t dk, const float* q, const float* k,
                               const float* v, float beta, float decay, float* out) {
  for (int64_t r = 0; r < dv; ++r) {
    float* row = state + r * dk;
    // Ask for the row kPrefetchRows ahead (past the last row: the next head's matrix, which
    // follows in memory): each row's dot products form a dependency chain that leaves the
    // memory system idle unless the next rows are already on their way.
    const float* ahead = row + kPrefetchRows * dk;
    for (int64_t c = 0; c < dk; c += kFloatsPerLine) __builtin_prefetch(ahead + c, 1, 3);
    for (int64_t c = 0; c < dk; ++c) row[c] *= decay;
    float delta = beta * (v[r] - dot_f32(row, k, dk));
    for (int64_t c = 0; c < dk; ++c) row[c] += delta * k[c];
    out[r] = dot_f32(row, q, dk);
  }
}

void gated_delta_recurrent(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in,
                           float* out, int64_t out_stride) {
#if defined(__x86_64__)
  static const bool avx512 = active_isa_level() == Isa::kAvx512;
  const auto step =
      avx512 && dk % kDotF32Lanes == 0 ? gated_delta_step_avx512 : gated_delta_step_portable;
#else
  const auto step = gated_delta_step_portable;
#endif
  for (int64_t t = 0; t < in.rows; ++t) {
    step(state, dv, dk, in.q + t * in.qk_stride, in.k + t * in.qk_stride, in.v + t * in.v_stride,
         in.beta[t], std::exp(in.g[t]), out + t * out_stride);
  }
}

void gated_delta_chunked(float* state, int64_t dv, int64_t dk, const DeltaRuleRows& in, float* out,
                         int64_t out_stride, int64_t chunk_rows) {
  ChunkScratch scratch;
  scratch.cum.resize(static_cast<std::size_t>(chunk_rows));
  scratch.a.assign(static_cast<std::size_t>(chunk_rows * chunk_rows), 0.0f);
  scratch.u.resize(static_cast<std::size_t>(chunk_rows * dv));
  scratch.w.resize(static_cast<std::size_t>(chunk_rows * dk));
  scratch.tmp.resize(static_cast<std::size_t>(dv));
  // A short last chunk is exactly a zero-padded one: padding rows (β = g = 0, q = k = v = 0)
  // change neither the state nor the real rows' outputs.
  for (int64_t t0 = 0; t0 < in.rows; t0 += chunk_rows) {
    int64_t n = std::min(chunk_rows, in.rows - t0);
    chunk(state, dv, dk, in, t0, n, out, out_stride, scratch);
  }
}

}  // namespace md::kernels
