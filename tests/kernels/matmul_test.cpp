#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernel_test_util.h"

namespace md::kernels {
namespace {

using test::random_bf16;
using test::random_floats;

struct Problem {
  int64_t rows, cols, n;
  std::vector<uint16_t> w;
  std::vector<float> x;
  Problem(int64_t r, int64_t c, int64_t batch, uint64_t seed)
      : rows(r), cols(c), n(batch),
        w(random_bf16(static_cast<std::size_t>(r * c), seed)),
        x(random_floats(static_cast<std::size_t>(batch * c), seed + 1)) {}
  Bf16Matrix matrix() const { return {w.data(), rows, cols}; }
};

TEST(Matmul, MatchesDoubleOracle) {
  // Column counts cover a multiple of the lane width, a tail, and fewer columns than lanes.
  for (int64_t cols : {5, 64, 77, 1000}) {
    Problem p(37, cols, 3, static_cast<uint64_t>(cols));
    std::vector<float> y(static_cast<std::size_t>(p.n * p.rows));
    matmul(p.matrix(), p.x.data(), p.n, y.data(), nullptr);
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t r = 0; r < p.rows; ++r) {
        double sum = 0, magnitude = 0;
        for (int64_t c = 0; c < cols; ++c) {
          double term = test::widen(p.w[static_cast<std::size_t>(r * cols + c)]) *
                        p.x[static_cast<std::size_t>(n * cols + c)];
          sum += term;
          magnitude += std::abs(term);
        }
        // f32 accumulation: error bounded by ~ n·eps·Σ|terms|; a wrong index is off by O(1).
        EXPECT_NEAR(y[static_cast<std::size_t>(n * p.rows + r)], sum,
                    1e-6 * magnitude * std::sqrt(static_cast<double>(cols)) + 1e-30)
            << "row " << r << " batch " << n << " cols " << cols;
      }
    }
  }
}

TEST(Matmul, RowResultIsIndependentOfBatchAndThreads) {
  Problem p(300, 515, 8, 7);
  std::vector<float> batched(static_cast<std::size_t>(p.n * p.rows));
  ThreadPool pool(3);
  matmul(p.matrix(), p.x.data(), p.n, batched.data(), &pool);
  for (int64_t n = 0; n < p.n; ++n) {
    std::vector<float> alone(static_cast<std::size_t>(p.rows));
    matmul(p.matrix(), p.x.data() + n * p.cols, 1, alone.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + n * p.rows, alone.size() * sizeof(float)))
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
