#include "kernels/gated_delta_rule.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernel_test_util.h"
#include "kernels/isa.h"

namespace md::kernels {
namespace {

constexpr int64_t kDk = 32, kDv = 16;  // K ≠ V so a transposed state shows at once

struct Inputs {
  int64_t rows;
  std::vector<float> q, k, v, beta, g;
  explicit Inputs(int64_t n, uint64_t seed) : rows(n) {
    q = test::random_floats(n * kDk, seed);
    k = test::random_floats(n * kDk, seed + 1);
    v = test::random_floats(n * kDv, seed + 2);
    for (int64_t t = 0; t < n; ++t) {  // unit-norm keys (as after the L2 norm), scaled queries
      normalise(k.data() + t * kDk, 1.0f);
      normalise(q.data() + t * kDk, 1.0f / std::sqrt(static_cast<float>(kDk)));
    }
    std::vector<float> b = test::random_floats(n, seed + 3), a = test::random_floats(n, seed + 4);
    for (int64_t t = 0; t < n; ++t) {
      beta.push_back(1.0f / (1.0f + std::exp(-b[t])));
      g.push_back(-0.3f * std::log1p(std::exp(a[t])));
    }
  }
  static void normalise(float* x, float scale) {
    double sum = 0;
    for (int64_t i = 0; i < kDk; ++i) sum += x[i] * x[i];
    for (int64_t i = 0; i < kDk; ++i) x[i] = static_cast<float>(x[i] / std::sqrt(sum) * scale);
  }
  DeltaRuleRows view() const {
    return {q.data(), k.data(), v.data(), kDk, kDv, beta.data(), g.data(), rows};
  }
};

// The recurrence of spec §5 step 5 in double, written independently of the kernel.
void oracle(std::vector<double>& s, const Inputs& in, std::vector<double>& out) {
  for (int64_t t = 0; t < in.rows; ++t) {
    double decay = std::exp(static_cast<double>(in.g[t]));
    for (double& x : s) x *= decay;
    for (int64_t r = 0; r < kDv; ++r) {
      double p = 0;
      for (int64_t c = 0; c < kDk; ++c) p += s[r * kDk + c] * in.k[t * kDk + c];
      double delta = in.beta[t] * (in.v[t * kDv + r] - p);
      for (int64_t c = 0; c < kDk; ++c) s[r * kDk + c] += delta * in.k[t * kDk + c];
    }
    for (int64_t r = 0; r < kDv; ++r) {
      double o = 0;
      for (int64_t c = 0; c < kDk; ++c) o += s[r * kDk + c] * in.q[t * kDk + c];
      out.push_back(o);
    }
  }
}

std::vector<float> initial_state(bool nonzero) {
  if (!nonzero) return std::vector<float>(kDv * kDk, 0.0f);
  return test::random_floats(kDv * kDk, 99, 0.5f);
}

TEST(GatedDeltaRule, RecurrenceMatchesDoubleOracle) {
  for (bool nonzero : {false, true}) {
    Inputs in(70, 5);
    std::vector<float> state = initial_state(nonzero), out(in.rows * kDv);
    std::vector<double> s(state.begin(), state.end()), expected;
    gated_delta_recurrent(state.data(), kDv, kDk, in.view(), out.data(), kDv);
    oracle(s, in, expected);
    EXPECT_LT(test::relative_max_error(out, expected), 1e-5);
    EXPECT_LT(test::relative_max_error(state, s), 1e-5);
  }
}

TEST(GatedDeltaRule, ChunkedEqualsRecurrence) {
  for (int64_t rows : {1, 3, 63, 64, 65, 130}) {
    for (bool nonzero : {false, true}) {
      Inputs in(rows, static_cast<uint64_t>(rows) * 7);
      std::vector<float> s_rec = initial_state(nonzero), s_chunk = s_rec;
      std::vector<float> o_rec(rows * kDv), o_chunk(rows * kDv);
      gated_delta_recurrent(s_rec.data(), kDv, kDk, in.view(), o_rec.data(), kDv);
      gated_delta_chunked(s_chunk.data(), kDv, kDk, in.view(), o_chunk.data(), kDv, 64);
      std::vector<double> ref_out(o_rec.begin(), o_rec.end()),
          ref_state(s_rec.begin(), s_rec.end());
      EXPECT_LT(test::relative_max_error(o_chunk, ref_out), 1e-5) << rows << " rows";
      EXPECT_LT(test::relative_max_error(s_chunk, ref_state), 1e-5) << rows << " rows";
    }
  }
}

TEST(GatedDeltaRule, ChunkedWithoutDecayTermFails) {
  // Negative control: dropping the in-chunk decay (g = 0 in the chunked run only) must be caught
  // by the same 1e-5 bound.
  Inputs in(65, 3);
  Inputs no_decay = in;
  std::fill(no_decay.g.begin(), no_decay.g.end(), 0.0f);
  std::vector<float> s_rec(kDv * kDk, 0.0f), s_chunk = s_rec, o_rec(65 * kDv), o_chunk(65 * kDv);
  gated_delta_recurrent(s_rec.data(), kDv, kDk, in.view(), o_rec.data(), kDv);
  gated_delta_chunked(s_chunk.data(), kDv, kDk, no_decay.view(), o_chunk.data(), kDv, 64);
  std::vector<double> ref(o_rec.begin(), o_rec.end());
  EXPECT_GT(test::relative_max_error(o_chunk, ref), 1e-2);
}

#if defined(__x86_64__)
// The AVX-512 step is bitwise the portable one (same products, same sums, same fold), for row
// counts around its four-row groups and widths of one to several registers, on states and inputs
// of every magnitude.
TEST(GatedDeltaRule, Avx512StepIsBitwiseThePortableStep) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "the CPU lacks AVX-512";
  for (int64_t dk : {16, 32, 128}) {
    for (int64_t dv : {1, 3, 4, 5, 8, 17}) {
      const auto seed = static_cast<uint64_t>(dk * 100 + dv);
      std::vector<float> state =
          test::random_floats(static_cast<std::size_t>(dv * dk), seed, 30.0f);
      std::vector<float> q = test::random_floats(static_cast<std::size_t>(dk), seed + 1, 0.2f);
      std::vector<float> k = test::random_floats(static_cast<std::size_t>(dk), seed + 2, 0.2f);
      std::vector<float> v = test::random_floats(static_cast<std::size_t>(dv), seed + 3, 5.0f);
      std::vector<float> expected_state = state, out(static_cast<std::size_t>(dv)), expected = out;
      for (float decay : {1.0f, 0.93f, 1e-3f}) {
        gated_delta_step_portable(expected_state.data(), dv, dk, q.data(), k.data(), v.data(), 0.7f,
                                  decay, expected.data());
        gated_delta_step_avx512(state.data(), dv, dk, q.data(), k.data(), v.data(), 0.7f, decay,
                                out.data());
        ASSERT_EQ(0, std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)))
            << "dk " << dk << " dv " << dv << " decay " << decay;
        ASSERT_EQ(0, std::memcmp(state.data(), expected_state.data(), state.size() * sizeof(float)))
            << "dk " << dk << " dv " << dv << " decay " << decay;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace md::kernels
