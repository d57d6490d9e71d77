#include "kernels/attention.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace md::kernels {
namespace {

TEST(Attention, MatchesDoubleSoftmaxForF32AndBf16Caches) {
  const int64_t n = 23, d = 40, stride = 40;
  std::vector<float> q = test::random_floats(d, 1, 2.0f);
  std::vector<uint16_t> kb = test::random_bf16(n * stride, 2), vb = test::random_bf16(n * stride, 3);
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

}  // namespace
}  // namespace md::kernels
