#include "kernels/kda_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/delta_rule_chunk.h"
#include "kernels/dot_f32.h"

namespace md::kernels {

namespace {

// Σ_c a[c] b[c] e^{G_t[c] − G_j[c]}, the decayed dot of a token t and an earlier token j ≤ t.
float decayed_dot(const float* a, const float* b, const float* cum_t, const float* cum_j,
                  int64_t dk) {
  float sum = 0;
  for (int64_t c = 0; c < dk; ++c) sum += a[c] * b[c] * std::exp(cum_t[c] - cum_j[c]);
  return sum;
}

// One chunk's scratch: cumulative log-decays, the strictly lower-triangular A and the two
// substitution results.
struct ChunkScratch {
  std::vector<float> cum;     // G_t[c], n × dk
  std::vector<float> a;       // A[t][j], n × n
  std::vector<float> u;       // U_t (value vectors), n × dv
  std::vector<float> w;       // W_t (key vectors), n × dk
  std::vector<float> scaled;  // one key vector
  std::vector<float> tmp;     // one value vector
};

void chunk(float* state, int64_t dv, int64_t dk, const KdaRows& in, int64_t t0, int64_t n,
           float* out, int64_t out_stride, ChunkScratch& s) {
  auto q = [&](int64_t t) { return in.q + (t0 + t) * in.qk_stride; };
  auto k = [&](int64_t t) { return in.k + (t0 + t) * in.qk_stride; };
  auto v = [&](int64_t t) { return in.v + (t0 + t) * in.v_stride; };
  auto cum = [&](int64_t t) { return s.cum.data() + t * dk; };
  for (int64_t t = 0; t < n; ++t) {
    const float* g = in.g + (t0 + t) * in.g_stride;
    for (int64_t c = 0; c < dk; ++c) cum(t)[c] = (t == 0 ? 0.0f : cum(t - 1)[c]) + g[c];
  }
  // A[t][j] = β_t Σ_c k_t[c] k_j[c] e^{G_t[c] − G_j[c]} for j < t.
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < t; ++j) {
      s.a[t * n + j] = in.beta[t0 + t] * decayed_dot(k(t), k(j), cum(t), cum(j), dk);
    }
  }
  // Forward substitution of (I + A) U0 = β v and (I + A) W = β (k ⊙ e^{G_t}).
  for (int64_t t = 0; t < n; ++t) {
    float* u_t = s.u.data() + t * dv;
    float* w_t = s.w.data() + t * dk;
    const float beta = in.beta[t0 + t];
    for (int64_t i = 0; i < dv; ++i) u_t[i] = beta * v(t)[i];
    for (int64_t c = 0; c < dk; ++c) w_t[c] = beta * (k(t)[c] * std::exp(cum(t)[c]));
    subtract_earlier_rows(s.a.data(), n, t, s.u.data(), dv, s.w.data(), dk);
  }
  // U_t = U0_t − S0 W_t: the chunk's corrected values (δ of each token).
  subtract_state_products(state, dv, dk, n, s.w.data(), s.u.data(), s.tmp.data());
  // O_t = S0 (q_t ⊙ e^{G_t}) + Σ_{j≤t} (Σ_c q_t[c] k_j[c] e^{G_t[c] − G_j[c]}) U_j.
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + (t0 + t) * out_stride;
    for (int64_t c = 0; c < dk; ++c) s.scaled[c] = q(t)[c] * std::exp(cum(t)[c]);
    state_times(state, dv, dk, s.scaled.data(), o);
    for (int64_t j = 0; j <= t; ++j) {
      const float coef = decayed_dot(q(t), k(j), cum(t), cum(j), dk);
      const float* u_j = s.u.data() + j * dv;
      for (int64_t i = 0; i < dv; ++i) o[i] += coef * u_j[i];
    }
  }
  // S ← S ⊙ e^{G_last} (per key channel) + Σ_j U_j ⊗ (k_j ⊙ e^{G_last − G_j}).
  const float* last = cum(n - 1);
  for (int64_t c = 0; c < dk; ++c) s.scaled[c] = std::exp(last[c]);
  for (int64_t r = 0; r < dv; ++r) {
    float* row = state + r * dk;
    for (int64_t c = 0; c < dk; ++c) row[c] *= s.scaled[c];
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < dk; ++c) s.scaled[c] = k(j)[c] * std::exp(last[c] - cum(j)[c]);
    const float* u_j = s.u.data() + j * dv;
    for (int64_t r = 0; r < dv; ++r) {
      float* row = state + r * dk;
      for (int64_t c = 0; c < dk; ++c) row[c] += u_j[r] * s.scaled[c];
    }
  }
}

}  // namespace

void kda_step(float* state, int64_t dv, int64_t dk, const float* q, const float* k, const float* v,
              float beta, const float* decay, float* out) {
  for (int64_t r = 0; r < dv; ++r) {
    float* row = state + r * dk;
    for (int64_t c = 0; c < dk; ++c) row[c] *= decay[c];
    const float delta = beta * (v[r] - dot_f32(row, k, dk));
    for (int64_t c = 0; c < dk; ++c) row[c] += delta * k[c];
    out[r] = dot_f32(row, q, dk);
  }
}

void kda_recurrent(float* state, int64_t dv, int64_t dk, const KdaRows& in, float* out,
                   int64_t out_stride) {
  std::vector<float> decay(static_cast<std::size_t>(dk));
  for (int64_t t = 0; t < in.rows; ++t) {
    const float* g = in.g + t * in.g_stride;
    for (int64_t c = 0; c < dk; ++c) decay[static_cast<std::size_t>(c)] = std::exp(g[c]);
    kda_step(state, dv, dk, in.q + t * in.qk_stride, in.k + t * in.qk_stride,
             in.v + t * in.v_stride, in.beta[t], decay.data(), out + t * out_stride);
  }
}

void kda_chunked(float* state, int64_t dv, int64_t dk, const KdaRows& in, float* out,
                 int64_t out_stride, int64_t chunk_rows) {
  if (chunk_rows <= 0) fail("kda_chunked: chunk of {} rows", chunk_rows);
  ChunkScratch scratch;
  scratch.cum.resize(static_cast<std::size_t>(chunk_rows * dk));
  scratch.a.assign(static_cast<std::size_t>(chunk_rows * chunk_rows), 0.0f);
  scratch.u.resize(static_cast<std::size_t>(chunk_rows * dv));
  scratch.w.resize(static_cast<std::size_t>(chunk_rows * dk));
  scratch.scaled.resize(static_cast<std::size_t>(dk));
  scratch.tmp.resize(static_cast<std::size_t>(dv));
  // A short last chunk is exactly a zero-padded one: padding rows (β = g = 0, q = k = v = 0)
  // change neither the state nor the real rows' outputs.
  for (int64_t t0 = 0; t0 < in.rows; t0 += chunk_rows) {
    chunk(state, dv, dk, in, t0, std::min(chunk_rows, in.rows - t0), out, out_stride, scratch);
  }
}

}  // namespace md::kernels
