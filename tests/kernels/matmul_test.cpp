#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"
#include "matmul_problem.h"

namespace md::kernels {
namespace {

using test::random_bf16;
using test::random_floats;

using Problem = test::MatmulProblem;

// Column counts around the lane widths (8, 16), the column chunk (512) and below one vector.
constexpr int64_t kColumnCases[] = {1, 5, 7, 8, 9, 15, 16, 17, 31, 64, 77, 512, 519, 1000, 1031};

class MatmulIsa : public ::testing::TestWithParam<Isa> {
 protected:
  const MatmulKernels& kernels() const { return matmul_kernels(GetParam()); }

  // The product computed one output at a time: the reference every other split must equal.
  std::vector<float> one_by_one(const Problem& p, int64_t y_stride) const {
    std::vector<float> y(static_cast<std::size_t>(p.n * y_stride), -7.0f);
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t r = 0; r < p.rows; ++r) {
        kernels().tile(p.matrix(), r, r + 1, p.x() + n * p.x_stride, p.x_stride, 1,
                       MatmulOut{y.data() + n * y_stride, y_stride, false});
      }
    }
    return y;
  }
};

TEST_P(MatmulIsa, MatchesDoubleOracle) {
  for (int64_t cols : kColumnCases) {
    for (bool accumulate : {false, true}) {
      Problem p(37, cols, 5, static_cast<uint64_t>(cols));
      const int64_t y_stride = p.rows + 2;
      std::vector<float> y = random_floats(static_cast<std::size_t>(p.n * y_stride), 99);
      const std::vector<float> before = y;
      kernels().tile(p.matrix(), 0, p.rows, p.x(), p.x_stride, p.n,
                     MatmulOut{y.data(), y_stride, accumulate});
      for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t r = 0; r < p.rows; ++r) {
          auto at = static_cast<std::size_t>(n * y_stride + r);
          double sum = accumulate ? before[at] : 0.0;
          double magnitude = std::abs(sum);
          for (int64_t c = 0; c < cols; ++c) {
            double term = p.weight(r, c) * p.input(n, c);
            sum += term;
            magnitude += std::abs(term);
          }
          // f32 accumulation: error bounded by ~ n·eps·Σ|terms|; a wrong index is off by O(1).
          ASSERT_NEAR(y[at], sum, 1e-6 * magnitude * std::sqrt(static_cast<double>(cols)) + 1e-30)
              << isa_name(GetParam()) << " row " << r << " input " << n << " cols " << cols
              << " accumulate " << accumulate;
        }
        // The padding between output rows is never written.
        for (int64_t r = p.rows; r < y_stride; ++r) {
          auto at = static_cast<std::size_t>(n * y_stride + r);
          ASSERT_EQ(y[at], before[at]);
        }
      }
    }
  }
}

TEST_P(MatmulIsa, OutputIsBitwiseIndependentOfBatchAndTiling) {
  // 48 and 1024 columns (whole vectors) with more than 16 inputs take the many-row panels
  // (dense_panel.h); the others end in a tail and stay on the GEMV.
  for (int64_t cols : {7, 77, 1031, 48, 1024}) {
    Problem p(45, cols, 33, 3 + static_cast<uint64_t>(cols));
    const int64_t y_stride = p.rows;
    const std::vector<float> reference = one_by_one(p, y_stride);
    // Tilings: whole, odd splits that cut register blocks, and single rows.
    const std::vector<std::vector<int64_t>> tilings = {
        {0, 45}, {0, 5, 13, 14, 40, 45}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 45}};
    for (int64_t batch : {1, 2, 3, 4, 5, 8, 9, 16, 17, 33}) {
      for (const auto& cuts : tilings) {
        // A batch of the first `batch` inputs; rows of a prefix must not see the rows after it.
        std::vector<float> y(static_cast<std::size_t>(batch * y_stride), -7.0f);
        for (std::size_t t = 0; t + 1 < cuts.size(); ++t) {
          kernels().tile(p.matrix(), cuts[t], cuts[t + 1], p.x(), p.x_stride, batch,
                         MatmulOut{y.data(), y_stride, false});
        }
        ASSERT_EQ(0, std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)))
            << isa_name(GetParam()) << " cols " << cols << " batch " << batch << " tiles "
            << cuts.size() - 1;
      }
    }
    // Accumulating adds the same sum once: y0 + s in f32, whatever the batch.
    std::vector<float> base = random_floats(reference.size(), 5);
    std::vector<float> y = base;
    kernels().tile(p.matrix(), 0, p.rows, p.x(), p.x_stride, p.n,
                   MatmulOut{y.data(), y_stride, true});
    for (std::size_t i = 0; i < y.size(); ++i) {
      float expected = base[i] + reference[i];
      ASSERT_EQ(0, std::memcmp(&y[i], &expected, sizeof(float))) << "accumulate, output " << i;
    }
    // dot_bf16 is one output of the same kernel.
    for (int64_t r = 0; r < p.rows; ++r) {
      float dot = kernels().dot(p.matrix().row(r), p.x(), cols);
      ASSERT_EQ(0, std::memcmp(&dot, &reference[static_cast<std::size_t>(r)], sizeof(float)))
          << "dot_bf16 row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, MatmulIsa, ::testing::ValuesIn(available_isas()),
                         [](const ::testing::TestParamInfo<Isa>& param) {
                           return std::string(isa_name(param.param));
                         });

TEST(Matmul, DispatchedEntryPointsUseTheActiveIsa) {
  Problem p(300, 515, 8, 7);
  const MatmulKernels& active = matmul_kernels(active_isa_level());
  std::vector<float> expected(static_cast<std::size_t>(p.n * p.rows));
  std::vector<float> packed(static_cast<std::size_t>(p.n * p.cols));
  for (int64_t n = 0; n < p.n; ++n) {
    std::memcpy(packed.data() + n * p.cols, p.x() + n * p.x_stride,
                static_cast<std::size_t>(p.cols) * sizeof(float));
  }
  active.tile(p.matrix(), 0, p.rows, packed.data(), p.cols, p.n,
              MatmulOut{expected.data(), p.rows, false});

  std::vector<float> threaded(expected.size());
  ThreadPool pool(3);
  matmul(p.matrix(), packed.data(), p.n, threaded.data(), &pool);
  EXPECT_EQ(0, std::memcmp(threaded.data(), expected.data(), expected.size() * sizeof(float)));

  std::vector<float> rows(expected.size());
  matmul_rows(p.matrix(), packed.data(), p.n, rows.data(), 0, 111);
  matmul_rows(p.matrix(), packed.data(), p.n, rows.data(), 111, p.rows);
  EXPECT_EQ(0, std::memcmp(rows.data(), expected.data(), expected.size() * sizeof(float)));

  std::vector<float> tiled(expected.size());
  matmul_tile(p.matrix(), 0, p.rows, packed.data(), p.cols, p.n, MatmulOut{tiled.data(), p.rows});
  EXPECT_EQ(0, std::memcmp(tiled.data(), expected.data(), expected.size() * sizeof(float)));

  float dot = dot_bf16(p.matrix().row(4), packed.data(), p.cols);
  EXPECT_EQ(0, std::memcmp(&dot, &expected[4], sizeof(float)));
}

TEST(Matmul, RowResultIsIndependentOfBatchAndThreads) {
  Problem p(300, 515, 8, 7);
  std::vector<float> packed(static_cast<std::size_t>(p.n * p.cols));
  for (int64_t n = 0; n < p.n; ++n) {
    std::memcpy(packed.data() + n * p.cols, p.x() + n * p.x_stride,
                static_cast<std::size_t>(p.cols) * sizeof(float));
  }
  std::vector<float> batched(static_cast<std::size_t>(p.n * p.rows));
  ThreadPool pool(3);
  matmul(p.matrix(), packed.data(), p.n, batched.data(), &pool);
  for (int64_t n = 0; n < p.n; ++n) {
    std::vector<float> alone(static_cast<std::size_t>(p.rows));
    matmul(p.matrix(), packed.data() + n * p.cols, 1, alone.data(), nullptr);
    EXPECT_EQ(0,
              std::memcmp(alone.data(), batched.data() + n * p.rows, alone.size() * sizeof(float)))
        << "row " << n << " of the block differs bitwise from the same row computed alone";
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 3, 4, 5, 1000}) {
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[static_cast<std::size_t>(i)];
    });
    for (int hit : hits) EXPECT_EQ(hit, 1);
  }
}

}  // namespace
}  // namespace md::kernels
