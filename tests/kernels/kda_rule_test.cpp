// Kimi Delta Attention's kernels (kernels/kda_rule.h) against a float64 transcription of the
// spec's step (§6.2 step 4, in the spec's S[key][value] layout), the chunked form against the
// token-by-token one, and the per-head rule as the special case of equal decays.
#include "kernels/kda_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/gated_delta_rule.h"

namespace md::kernels {
namespace {

constexpr int64_t kD = 32;

struct Tokens {
  std::vector<float> q, k, v, g, beta;
  int64_t rows = 0;
  KdaRows view() const {
    return {q.data(), k.data(), v.data(), kD, kD, beta.data(), g.data(), kD, rows};
  }
};

void normalize(float* x) {
  double sum = 0;
  for (int64_t c = 0; c < kD; ++c) sum += double{x[c]} * x[c];
  for (int64_t c = 0; c < kD; ++c) x[c] = static_cast<float>(x[c] / std::sqrt(sum));
}

// Random tokens as a KDA head sees them: q normalised and scaled, k normalised, decays from the
// lower-bound gate (some channels near −5, some near 0), β in (0, 1).
Tokens tokens(int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tokens t;
  t.rows = rows;
  t.q.resize(static_cast<std::size_t>(rows * kD));
  t.k.resize(t.q.size());
  t.v.resize(t.q.size());
  t.g.resize(t.q.size());
  t.beta.resize(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < kD; ++c) {
      const auto at = static_cast<std::size_t>(r * kD + c);
      t.q[at] = normal(rng);
      t.k[at] = normal(rng);
      t.v[at] = normal(rng);
      t.g[at] = kda_lower_bound_gate(std::exp(0.3f), 2.0f * normal(rng), 0.1f, -5.0f);
    }
    normalize(&t.q[static_cast<std::size_t>(r * kD)]);
    for (int64_t c = 0; c < kD; ++c)
      t.q[static_cast<std::size_t>(r * kD + c)] *= 1 / std::sqrt(32.0f);
    normalize(&t.k[static_cast<std::size_t>(r * kD)]);
    t.beta[static_cast<std::size_t>(r)] = sigmoid(normal(rng));
  }
  return t;
}

std::vector<float> random_state(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> s(static_cast<std::size_t>(kD * kD));
  for (float& x : s) x = normal(rng);
  return s;
}

// §6.2 step 4 literally, float64, S[i][j] with i the key channel: decay along i, prediction,
// update, read-out. `state` is megadecode's S[v][k], transposed in and out.
void spec_step(std::vector<double>& s, const float* q, const float* k, const float* v, float beta,
               const float* g, double* o) {
  for (int64_t i = 0; i < kD; ++i)
    for (int64_t j = 0; j < kD; ++j) s[i * kD + j] *= std::exp(double{g[i]});
  for (int64_t j = 0; j < kD; ++j) {
    double pred = 0;
    for (int64_t i = 0; i < kD; ++i) pred += double{k[i]} * s[i * kD + j];
    const double u = beta * (v[j] - pred);
    for (int64_t i = 0; i < kD; ++i) s[i * kD + j] += double{k[i]} * u;
  }
  for (int64_t j = 0; j < kD; ++j) {
    o[j] = 0;
    for (int64_t i = 0; i < kD; ++i) o[j] += double{q[i]} * s[i * kD + j];
  }
}

// §15 test 4: the step matches the direct rule at rtol 2e-5 / atol 2e-6, over 24 tokens.
// Negative control: the decay applied along the value index instead of the key index fails.
TEST(KdaRule, StepsMatchTheSpecsDirectRule) {
  const Tokens t = tokens(24, 3);
  std::vector<float> state = random_state(4), swapped = state;
  std::vector<double> reference(static_cast<std::size_t>(kD * kD));
  for (int64_t v = 0; v < kD; ++v)
    for (int64_t c = 0; c < kD; ++c) reference[c * kD + v] = state[v * kD + c];
  std::vector<float> out(t.q.size()), out_swapped(t.q.size());
  kda_recurrent(state.data(), kD, kD, t.view(), out.data(), kD);
  double worst_excess = -1, worst_swapped = 0;
  std::vector<double> o(kD);
  std::vector<float> decay(kD);
  for (int64_t r = 0; r < t.rows; ++r) {
    const auto at = static_cast<std::size_t>(r * kD);
    spec_step(reference, &t.q[at], &t.k[at], &t.v[at], t.beta[r], &t.g[at], o.data());
    // The wrong axis: decay[v] applied to value row v (a whole row decays alike).
    float* row = swapped.data();
    for (int64_t v = 0; v < kD; ++v)
      for (int64_t c = 0; c < kD; ++c) row[v * kD + c] *= std::exp(t.g[at + v]);
    std::fill(decay.begin(), decay.end(), 1.0f);
    kda_step(swapped.data(), kD, kD, &t.q[at], &t.k[at], &t.v[at], t.beta[r], decay.data(),
             &out_swapped[at]);
    for (int64_t j = 0; j < kD; ++j) {
      const double tolerance = 2e-6 + 2e-5 * std::fabs(o[j]);
      worst_excess = std::max(worst_excess, std::fabs(out[at + j] - o[j]) - tolerance);
      worst_swapped = std::max(worst_swapped, std::fabs(out_swapped[at + j] - o[j]) / tolerance);
    }
  }
  EXPECT_LE(worst_excess, 0.0);
  EXPECT_GT(worst_swapped, 100.0);
  for (int64_t v = 0; v < kD; ++v)
    for (int64_t c = 0; c < kD; ++c)
      EXPECT_NEAR(state[v * kD + c], reference[c * kD + v],
                  2e-6 + 2e-5 * std::fabs(reference[c * kD + v]));
}

// §15 test 4: chunked prefill matches token-by-token within a few 1e-2 relative (here far
// closer); 40 tokens in chunks of 16 leave a short last chunk, and the final states agree too.
TEST(KdaRule, ChunkedEqualsTokenByToken) {
  const Tokens t = tokens(40, 5);
  std::vector<float> s_rec = random_state(6), s_chunk = s_rec;
  std::vector<float> o_rec(t.q.size()), o_chunk(t.q.size());
  kda_recurrent(s_rec.data(), kD, kD, t.view(), o_rec.data(), kD);
  kda_chunked(s_chunk.data(), kD, kD, t.view(), o_chunk.data(), kD, 16);
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < o_rec.size(); ++i) {
    diff = std::max(diff, double{std::fabs(o_rec[i] - o_chunk[i])});
    scale = std::max(scale, double{std::fabs(o_rec[i])});
  }
  EXPECT_LE(diff, 1e-4 * scale);
  double state_diff = 0, state_scale = 0;
  for (std::size_t i = 0; i < s_rec.size(); ++i) {
    state_diff = std::max(state_diff, double{std::fabs(s_rec[i] - s_chunk[i])});
    state_scale = std::max(state_scale, double{std::fabs(s_rec[i])});
  }
  EXPECT_LE(state_diff, 1e-4 * state_scale);
}

// With the same decay on every key channel the rule is the per-head gated delta rule, bit for
// bit (the same elementwise order and the same dots).
TEST(KdaRule, EqualDecaysAreThePerHeadRule) {
  const Tokens t = tokens(6, 7);
  std::vector<float> s_kda = random_state(8), s_gdn = s_kda;
  std::vector<float> o_kda(kD), o_gdn(kD), decay(kD);
  for (int64_t r = 0; r < t.rows; ++r) {
    const auto at = static_cast<std::size_t>(r * kD);
    const float factor = std::exp(t.g[at]);
    std::fill(decay.begin(), decay.end(), factor);
    kda_step(s_kda.data(), kD, kD, &t.q[at], &t.k[at], &t.v[at], t.beta[r], decay.data(),
             o_kda.data());
    gated_delta_step_portable(s_gdn.data(), kD, kD, &t.q[at], &t.k[at], &t.v[at], t.beta[r], factor,
                              o_gdn.data());
    ASSERT_EQ(std::memcmp(o_kda.data(), o_gdn.data(), kD * sizeof(float)), 0) << "token " << r;
  }
  EXPECT_EQ(s_kda, s_gdn);
}

TEST(KdaRule, TheLowerBoundGateIsASigmoidNotASoftplus) {
  // lower_bound · σ(exp(A_log) · (f + dt_bias)): at f + dt_bias = 0 exactly half the bound.
  EXPECT_EQ(kda_lower_bound_gate(2.0f, 0.25f, -0.25f, -5.0f), -2.5f);
  const double expected = -5.0 / (1.0 + std::exp(-std::exp(0.5) * (1.5 + 0.25)));
  EXPECT_NEAR(kda_lower_bound_gate(std::exp(0.5f), 1.5f, 0.25f, -5.0f), expected, 1e-6);
  EXPECT_GT(kda_lower_bound_gate(1.0f, 80.0f, 0.0f, -5.0f), -5.0f - 1e-6f);
  EXPECT_LT(kda_lower_bound_gate(1.0f, -80.0f, 0.0f, -5.0f), 0.0f + 1e-6f);
}

}  // namespace
}  // namespace md::kernels
