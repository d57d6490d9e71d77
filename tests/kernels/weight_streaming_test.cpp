#include "kernels/weight_streaming.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"
#include "kernels/weight_streaming_testing.h"
#include "matmul_problem.h"

namespace md::kernels {
namespace {

using testing::ForcedWeightStreaming;

TEST(WeightStreaming, ZenThreeAndLaterStreamByHardware) {
  EXPECT_TRUE(streams_by_hardware("AuthenticAMD", 0x19));  // Zen 3, Zen 4
  EXPECT_TRUE(streams_by_hardware("AuthenticAMD", 0x1a));  // Zen 5
  EXPECT_TRUE(streams_by_hardware("HygonGenuine", 0x19));
  EXPECT_FALSE(streams_by_hardware("AuthenticAMD", 0x17));  // Zen 1, Zen 2: not measured
  EXPECT_FALSE(streams_by_hardware("GenuineIntel", 0x6));
  EXPECT_FALSE(streams_by_hardware("GenuineIntel", 0x19));
}

TEST(WeightStreaming, RequestedWalkOverridesTheDefault) {
  EXPECT_EQ(resolve_weight_streaming("prefetch", WeightStreaming::kHardware),
            WeightStreaming::kPrefetch);
  EXPECT_EQ(resolve_weight_streaming("hardware", WeightStreaming::kPrefetch),
            WeightStreaming::kHardware);
  EXPECT_EQ(resolve_weight_streaming("", WeightStreaming::kHardware), WeightStreaming::kHardware);
  // Unknown: warned about, ignored.
  EXPECT_EQ(resolve_weight_streaming("fast", WeightStreaming::kPrefetch),
            WeightStreaming::kPrefetch);
  EXPECT_STREQ(weight_streaming_name(WeightStreaming::kHardware), "hardware");
  EXPECT_STREQ(weight_streaming_name(WeightStreaming::kPrefetch), "prefetch");
}

TEST(WeightStreaming, TheSeamForcesAWalkWhileItLives) {
  const WeightStreaming before = active_weight_streaming();
  {
    ForcedWeightStreaming forced(WeightStreaming::kHardware);
    EXPECT_EQ(active_weight_streaming(), WeightStreaming::kHardware);
  }
  {
    ForcedWeightStreaming forced(WeightStreaming::kPrefetch);
    EXPECT_EQ(active_weight_streaming(), WeightStreaming::kPrefetch);
    {
      ForcedWeightStreaming inner(WeightStreaming::kHardware);
      EXPECT_EQ(active_weight_streaming(), WeightStreaming::kHardware);
    }
    EXPECT_EQ(active_weight_streaming(), WeightStreaming::kPrefetch);  // the outer one's again
  }
  EXPECT_EQ(active_weight_streaming(), before);
}

// Every f32-input path this CPU runs, and the bf16-input one where it has AVX512-BF16.
struct Path {
  std::string name;
  const MatmulKernels* kernels;
};

std::vector<Path> paths() {
  std::vector<Path> all;
  for (Isa isa : available_isas()) all.push_back({isa_name(isa), &matmul_kernels(isa)});
#if defined(__x86_64__)
  if (bf16_inputs_refusal(best_isa(), has_avx512_bf16()).empty()) {
    all.push_back({"avx512bf16", &kMatmulAvx512Bf16});
  }
#endif
  return all;
}

class WeightStreamingIsa : public ::testing::TestWithParam<Path> {
 protected:
  const MatmulKernels& kernels() const { return *GetParam().kernels; }

  // The first `batch` input rows over weight rows cut at `cuts`, under `streaming`.
  std::vector<float> product(const test::MatmulProblem& p, int64_t batch,
                             const std::vector<int64_t>& cuts, WeightStreaming streaming,
                             bool accumulate, const std::vector<float>& start) const {
    ForcedWeightStreaming forced(streaming);
    std::vector<float> y(start.begin(), start.begin() + batch * p.rows);
    for (std::size_t t = 0; t + 1 < cuts.size(); ++t) {
      kernels().tile(p.matrix(), cuts[t], cuts[t + 1], p.x(), p.x_stride, batch,
                     MatmulOut{y.data(), p.rows, accumulate});
    }
    return y;
  }
};

// The walk is a performance choice: both give every output the bits of that output computed
// alone (dot), for 1-8 input rows (the four-part walk takes up to six on AVX-512, two on AVX2;
// the bf16-input path one), any row range, including ranges of fewer rows than streams, ranges
// whose rows do not split evenly, and ranges longer than one window (2 MiB of weights). Rows
// longer than the bf16-input path stages at once (8672 columns) take its column chunks there.
TEST_P(WeightStreamingIsa, BothWalksGiveTheSameBits) {
  struct Case {
    int64_t rows, cols;
  };
  constexpr int64_t kInputs = 8;
  // 1024 columns: 1024 rows to a window, so 2100 rows take three windows, the last ragged.
  for (Case c : {Case{3, 77}, Case{45, 1031}, Case{61, 16}, Case{2100, 1024}, Case{9, 9000}}) {
    test::MatmulProblem p(c.rows, c.cols, kInputs, 11 + static_cast<uint64_t>(c.cols));
    std::vector<float> alone(static_cast<std::size_t>(kInputs * c.rows));
    for (int64_t j = 0; j < kInputs; ++j) {
      for (int64_t r = 0; r < c.rows; ++r) {
        alone[static_cast<std::size_t>(j * c.rows + r)] =
            kernels().dot(p.matrix().row(r), p.x() + j * p.x_stride, c.cols);
      }
    }
    // The outputs differ, so that one written to another's place shows.
    ASSERT_GT(std::set<float>(alone.begin(), alone.end()).size(), alone.size() * 9 / 10);
    const std::vector<float> start = test::random_floats(alone.size(), 3);
    const std::vector<std::vector<int64_t>> cutss = {
        {0, c.rows}, {0, c.rows / 3, c.rows / 3 + 1, c.rows}, {0, 1, c.rows}};
    for (int64_t batch : {1, 2, 3, 4, 6, 7, 8}) {
      if (c.rows == 2100 && batch > 2) continue;  // the window crossing needs no more
      const auto size = static_cast<std::size_t>(batch * c.rows);
      for (WeightStreaming streaming : {WeightStreaming::kPrefetch, WeightStreaming::kHardware}) {
        for (const auto& cuts : cutss) {
          std::vector<float> y = product(p, batch, cuts, streaming, false, start);
          ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), size * sizeof(float)))
              << GetParam().name << " " << weight_streaming_name(streaming) << " rows " << c.rows
              << " cols " << c.cols << " inputs " << batch << " tiles " << cuts.size() - 1;
          y = product(p, batch, cuts, streaming, true, start);
          for (std::size_t i = 0; i < size; ++i) {
            float expected = start[i] + alone[i];
            ASSERT_EQ(0, std::memcmp(&y[i], &expected, sizeof(float)))
                << weight_streaming_name(streaming) << " accumulating, inputs " << batch
                << ", output " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPath, WeightStreamingIsa, ::testing::ValuesIn(paths()),
                         [](const ::testing::TestParamInfo<Path>& param) {
                           return param.param.name;
                         });

}  // namespace
}  // namespace md::kernels
