#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "kernel_test_util.h"
#include "kernels/isa.h"

namespace md::kernels {
namespace {

TEST(Attention, MatchesDoubleSoftmaxForF32AndBf16Caches) {
  const int64_t n = 23, d = 40, stride = 40;
  std::vector<float> q = test::random_floats(d, 1, 2.0f);
  std::vector<uint16_t> kb = test::random_bf16(n * stride, 2),
                        vb = test::random_bf16(n * stride, 3);
  std::vector<float> kf(kb.size()), vf(vb.size());
  for (std::size_t i = 0; i < kb.size(); ++i) {
    kf[i] = bf16_to_f32(kb[i]);
    vf[i] = bf16_to_f32(vb[i]);
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> score(n);
  double max_score = -1e300, total = 0;
  for (int64_t t = 0; t < n; ++t) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += q[i] * static_cast<double>(kf[t * stride + i]);
    score[t] = s * scale;
    max_score = std::max(max_score, score[t]);
  }
  for (double& s : score) total += s = std::exp(s - max_score);
  std::vector<double> expected(d, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < d; ++i) expected[i] += score[t] / total * vf[t * stride + i];
  }
  std::vector<float> scratch(n), out(d);
  attend(q.data(), kf.data(), vf.data(), n, stride, d, static_cast<float>(scale), scratch.data(),
         out.data());
  EXPECT_LT(test::relative_max_error(out, expected), 1e-5);
  attend(q.data(), kb.data(), vb.data(), n, stride, d, static_cast<float>(scale), scratch.data(),
         out.data());
  EXPECT_LT(test::relative_max_error(out, expected), 1e-5);
}

#if defined(__x86_64__)
// The AVX2 value-sum loop is bitwise the portable out[d] += p · v[d] (one rounded product, one
// rounded sum), for lengths with and without a tail and for values of every magnitude.
TEST(Attention, Avx2ValueSumIsBitwiseThePortableLoop) {
  if (best_isa() == Isa::kScalar) GTEST_SKIP() << "the CPU lacks AVX2";
  for (int64_t n : {1, 7, 8, 64, 67, 128}) {
    const std::vector<uint16_t> v = test::random_bf16(static_cast<std::size_t>(n), 3 + n, 100.0f);
    std::vector<float> out = test::random_floats(static_cast<std::size_t>(n), 4 + n, 10.0f);
    std::vector<float> expected = out;
    for (float p : {0.0f, 1e-7f, 0.3f, -2.5f}) {
      for (int64_t d = 0; d < n; ++d) {
        const float product = p * bf16_to_f32(v[static_cast<std::size_t>(d)]);
        expected[static_cast<std::size_t>(d)] = expected[static_cast<std::size_t>(d)] + product;
      }
      add_scaled_bf16_avx2(p, v.data(), out.data(), n);
      ASSERT_EQ(0, std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)))
          << "n " << n << " p " << p;
    }
  }
}
#endif

}  // namespace
}  // namespace md::kernels
