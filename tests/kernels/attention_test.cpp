#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "kernels/attention_kernels.h"
#include "kernels/isa.h"

namespace md::kernels {
namespace {

// Keys and values of n positions, row by row (stride apart), as f32 and as the bf16 they round
// from; queries alike.
struct Problem {
  int64_t n = 0, head_dim = 0, stride = 0;
  std::vector<uint16_t> keys_bf16, values_bf16;
  std::vector<float> keys, values;

  Problem(int64_t n_keys, int64_t dim, uint64_t seed, float key_scale = 1.0f)
      : n(n_keys), head_dim(dim), stride(dim) {
    keys_bf16 = test::random_bf16(static_cast<std::size_t>(n * dim), seed, key_scale);
    values_bf16 = test::random_bf16(static_cast<std::size_t>(n * dim), seed + 1);
    for (std::size_t i = 0; i < keys_bf16.size(); ++i) {
      keys.push_back(bf16_to_f32(keys_bf16[i]));
      values.push_back(bf16_to_f32(values_bf16[i]));
    }
  }
};

// The attention of q over the first n_keys keys, in double, softmax with the exact exp.
std::vector<double> oracle(const Problem& p, const std::vector<float>& q, int64_t n_keys,
                           double scale) {
  std::vector<double> score(static_cast<std::size_t>(n_keys));
  double top = -1e300, total = 0;
  for (int64_t t = 0; t < n_keys; ++t) {
    double s = 0;
    for (int64_t d = 0; d < p.head_dim; ++d) {
      s += static_cast<double>(q[d]) * p.keys[t * p.stride + d];
    }
    score[t] = s * scale;
    top = std::max(top, score[t]);
  }
  for (double& s : score) total += s = std::exp(s - top);
  std::vector<double> out(static_cast<std::size_t>(p.head_dim), 0.0);
  for (int64_t t = 0; t < n_keys; ++t) {
    for (int64_t d = 0; d < p.head_dim; ++d)
      out[d] += score[t] / total * p.values[t * p.stride + d];
  }
  return out;
}

// Matches the double-precision oracle for f32 and bf16 caches, at key counts on and off tile
// boundaries up to a context past 4,096, head sizes with and without a vector tail. Negative
// controls: the same comparison fails for a wrong scale and for one key too few.
TEST(Attention, MatchesTheDoublePrecisionOracle) {
  for (int64_t dim : {int64_t{40}, int64_t{64}, int64_t{128}}) {
    const Problem p(5000, dim, 7 + static_cast<uint64_t>(dim), 3.0f);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    for (int64_t n : {int64_t{1}, int64_t{23}, int64_t{32}, int64_t{700}, int64_t{4097}, p.n}) {
      const std::vector<float> q = test::random_floats(static_cast<std::size_t>(dim), 11 + n, 1.0f);
      const std::vector<double> expected = oracle(p, q, n, scale);
      std::vector<float> out(static_cast<std::size_t>(dim));
      attend(q.data(), p.keys.data(), p.values.data(), n, p.stride, dim, static_cast<float>(scale),
             out.data());
      EXPECT_LT(test::relative_max_error(out, expected), 2e-5) << "f32, dim " << dim << ", n " << n;
      attend(q.data(), p.keys_bf16.data(), p.values_bf16.data(), n, p.stride, dim,
             static_cast<float>(scale), out.data());
      EXPECT_LT(test::relative_max_error(out, expected), 2e-5)
          << "bf16, dim " << dim << ", n " << n;
      if (n < 23) continue;
      attend(q.data(), p.keys.data(), p.values.data(), n, p.stride, dim,
             static_cast<float>(scale * 1.01), out.data());
      EXPECT_GT(test::relative_max_error(out, expected), 1e-4) << "scale control, n " << n;
      // The key control uses a query close to the last key, so that key carries real weight.
      std::vector<float> near_last(static_cast<std::size_t>(dim));
      for (int64_t d = 0; d < dim; ++d) near_last[d] = 0.1f * p.keys[(n - 1) * p.stride + d];
      const std::vector<double> control = oracle(p, near_last, n, scale);
      attend(near_last.data(), p.keys.data(), p.values.data(), n, p.stride, dim,
             static_cast<float>(scale), out.data());
      EXPECT_LT(test::relative_max_error(out, control), 2e-5) << "near-last query, n " << n;
      attend(near_last.data(), p.keys.data(), p.values.data(), n - 1, p.stride, dim,
             static_cast<float>(scale), out.data());
      EXPECT_GT(test::relative_max_error(out, control), 1e-4) << "key control, n " << n;
    }
  }
}

// A query's result does not depend on the queries passed with it (groups of every size, key
// counts that differ inside a group) nor on the path (scalar, AVX2, AVX-512): bitwise.
template <typename T>
void expect_every_path_and_grouping_alike(const std::vector<T>& keys, const std::vector<T>& values,
                                          const Problem& p) {
  const RegroupedTiles<T> tiles(keys.data(), values.data(), p.n, p.stride, p.head_dim);
  const int64_t queries = 11;
  std::vector<float> q = test::random_floats(static_cast<std::size_t>(queries * p.head_dim), 3);
  std::vector<int64_t> n_keys;
  for (int64_t i = 0; i < queries; ++i) n_keys.push_back(p.n - 3 * (queries - 1 - i) - i % 2);
  auto run = [&](const AttentionKernels& kernels, int64_t group) {
    std::vector<float> out(q.size(), -1.0f);
    for (int64_t first = 0; first < queries; first += group) {
      std::vector<AttentionQuery> batch;
      for (int64_t i = first; i < std::min(queries, first + group); ++i) {
        batch.push_back({q.data() + i * p.head_dim, n_keys[i], out.data() + i * p.head_dim});
      }
      if constexpr (std::is_same_v<T, float>) {
        kernels.f32(batch, tiles.view(), p.head_dim, 0.3f);
      } else {
        kernels.bf16(batch, tiles.view(), p.head_dim, 0.3f);
      }
    }
    return out;
  };
  const std::vector<float> alone = run(attention_kernels(Isa::kScalar), 1);
  for (Isa isa : available_isas()) {
    for (int64_t group : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, queries}) {
      const std::vector<float> out = run(attention_kernels(isa), group);
      ASSERT_EQ(0, std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)))
          << isa_name(isa) << ", groups of " << group << ", dim " << p.head_dim;
    }
  }
}

TEST(Attention, EveryPathAndEveryGroupingGiveTheSameBits) {
  for (int64_t dim : {int64_t{8}, int64_t{24}, int64_t{64}, int64_t{72}}) {
    // Key scale 30: scores spread far enough that many exponents underflow to the clamp.
    const Problem p(183, dim, 5 + static_cast<uint64_t>(dim), 30.0f);
    expect_every_path_and_grouping_alike(p.keys, p.values, p);
    expect_every_path_and_grouping_alike(p.keys_bf16, p.values_bf16, p);
  }
}

// Negative control for the test above: a different order of the same sums (the value chain in
// reverse key order) is not bitwise the kernel, so the comparison can see an order change.
TEST(Attention, ADifferentSummationOrderIsNotBitwiseEqual) {
  const Problem p(300, 64, 9);
  const std::vector<float> q = test::random_floats(64, 4);
  std::vector<float> out(64);
  attend(q.data(), p.keys.data(), p.values.data(), p.n, p.stride, p.head_dim, 0.125f, out.data());
  // The probabilities recomputed in f32 much as the kernel does (the exact exp aside), the values
  // then summed in reverse key order: close, but not the same bits.
  std::vector<float> s(static_cast<std::size_t>(p.n));
  float top = -1e30f;
  for (int64_t t = 0; t < p.n; ++t) {
    float acc = 0;
    for (int64_t d = 0; d < 64; ++d) acc = std::fma(q[d], p.keys[t * 64 + d], acc);
    s[t] = acc * 0.125f;
    top = std::max(top, s[t]);
  }
  double total = 0;
  for (float& x : s) total += x = std::exp(x - top);
  std::vector<float> backwards(64, 0.0f);
  for (int64_t t = p.n - 1; t >= 0; --t) {
    const float pt = s[t] * static_cast<float>(1.0 / total);
    for (int64_t d = 0; d < 64; ++d)
      backwards[d] = std::fma(pt, p.values[t * 64 + d], backwards[d]);
  }
  EXPECT_NE(0, std::memcmp(out.data(), backwards.data(), out.size() * sizeof(float)));
  EXPECT_LT(test::relative_max_error(out, std::vector<double>(backwards.begin(), backwards.end())),
            1e-5);
}

}  // namespace
}  // namespace md::kernels
