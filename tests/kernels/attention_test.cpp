#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "kernels/attention_kernels.h"
#include "kernels/fast_exp.h"
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
                                          const Problem& p, int64_t spread = 3) {
  const RegroupedTiles<T> tiles(keys.data(), values.data(), p.n, p.stride, p.head_dim);
  const int64_t queries = 11;
  std::vector<float> q = test::random_floats(static_cast<std::size_t>(queries * p.head_dim), 3);
  std::vector<int64_t> n_keys;
  for (int64_t i = 0; i < queries; ++i) n_keys.push_back(p.n - spread * (queries - 1 - i) - i % 2);
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
  // Several key blocks of the passes (attention_tiles.h kBlockKeys = 512): key counts from 499 to
  // 1,100, so groups end in different blocks and a group's shared keys end inside a block.
  for (int64_t dim : {int64_t{24}, int64_t{64}}) {
    const Problem p(1100, dim, 9 + static_cast<uint64_t>(dim), 30.0f);
    expect_every_path_and_grouping_alike(p.keys, p.values, p, 60);
    expect_every_path_and_grouping_alike(p.keys_bf16, p.values_bf16, p, 60);
  }
}

// attention.h's numerics replayed one operation at a time in plain floats (the kernel's own
// exp_nonpositive, which fast_exp_test checks on its own); `backwards` sums the values in
// reverse key order instead, the negative control.
std::vector<float> documented_order(const Problem& p, const float* q, int64_t n_keys, float scale,
                                    bool backwards = false) {
  std::vector<float> e(static_cast<std::size_t>(n_keys));
  float top = -INFINITY;
  for (int64_t t = 0; t < n_keys; ++t) {
    float acc = 0.0f;
    for (int64_t d = 0; d < p.head_dim; ++d) acc = std::fma(q[d], p.keys[t * p.stride + d], acc);
    e[t] = scale * acc;
    top = std::max(top, e[t]);
  }
  double lanes[8] = {};
  for (int64_t t = 0; t < n_keys; ++t) {
    e[t] = exp_nonpositive(e[t] - top);
    lanes[t % 8] += static_cast<double>(e[t]);
  }
  const double total = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
                       ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  const auto inv = static_cast<float>(1.0 / total);
  std::vector<float> out(static_cast<std::size_t>(p.head_dim), 0.0f);
  for (int64_t k = 0; k < n_keys; ++k) {
    const int64_t t = backwards ? n_keys - 1 - k : k;
    const float pt = e[t] * inv;
    for (int64_t d = 0; d < p.head_dim; ++d) {
      out[d] = std::fma(pt, p.values[t * p.stride + d], out[d]);
    }
  }
  return out;
}

// Every path, with 11 queries passed together (ragged key counts over several key blocks of the
// passes, attention_tiles.h), gives each query exactly the documented order's bits, for f32 and
// bf16 caches (the replay reads the bf16 values widened, as the kernel does). Control: the same
// sums with the value chain backwards are close but not the same bits, so an order change in
// any pass (blocks visited out of order, say) cannot pass.
TEST(Attention, FollowsTheDocumentedOrderBitwise) {
  const Problem p(1100, 64, 19, 4.0f);
  const int64_t queries = 11;
  const std::vector<float> q = test::random_floats(static_cast<std::size_t>(queries * 64), 8);
  std::vector<int64_t> n_keys;
  for (int64_t i = 0; i < queries; ++i) n_keys.push_back(p.n - 61 * (queries - 1 - i) - i % 2);
  const RegroupedTiles<float> f32_tiles(p.keys.data(), p.values.data(), p.n, p.stride, 64);
  const RegroupedTiles<uint16_t> bf16_tiles(p.keys_bf16.data(), p.values_bf16.data(), p.n, p.stride,
                                            64);
  for (Isa isa : available_isas()) {
    for (bool bf16 : {false, true}) {
      std::vector<float> out(q.size(), -1.0f);
      std::vector<AttentionQuery> batch;
      for (int64_t i = 0; i < queries; ++i) {
        batch.push_back({q.data() + i * 64, n_keys[i], out.data() + i * 64});
      }
      if (bf16) {
        attention_kernels(isa).bf16(batch, bf16_tiles.view(), 64, 0.125f);
      } else {
        attention_kernels(isa).f32(batch, f32_tiles.view(), 64, 0.125f);
      }
      for (int64_t i = 0; i < queries; ++i) {
        const std::vector<float> expected =
            documented_order(p, q.data() + i * 64, n_keys[i], 0.125f);
        ASSERT_EQ(0, std::memcmp(out.data() + i * 64, expected.data(), 64 * sizeof(float)))
            << isa_name(isa) << (bf16 ? " bf16" : " f32") << ", query " << i;
      }
      const std::vector<float> backwards =
          documented_order(p, q.data(), n_keys[0], 0.125f, /*backwards=*/true);
      EXPECT_NE(0, std::memcmp(out.data(), backwards.data(), 64 * sizeof(float)));
      EXPECT_LT(test::relative_max_error(std::vector<float>(out.begin(), out.begin() + 64),
                                         std::vector<double>(backwards.begin(), backwards.end())),
                1e-5);
    }
  }
}

}  // namespace
}  // namespace md::kernels
