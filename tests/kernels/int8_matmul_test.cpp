// int8-per-row weights (muse-spark-nvfp4.md §7): the quantiser's rounding rules on hand-built rows,
// and the products against a replay of their documented order, bitwise, on every path this CPU
// runs; rows inside a batch or a tile equal the same rows alone; the WeightMatrix entry points.
#include "kernels/int8_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "kernels/int8_matmul_kernels.h"
#include "kernels/int8_rows.h"
#include "kernels/lane_sum8.h"
#include "kernels/weight_matrix.h"

namespace md::kernels {
namespace {

struct Quantised {
  std::vector<std::int8_t> q;
  std::vector<float> scales;
};

Quantised quantise(const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::vector<std::uint16_t> bf16;
  for (float v : values) bf16.push_back(f32_to_bf16(v));
  Quantised out{std::vector<std::int8_t>(values.size()),
                std::vector<float>(static_cast<std::size_t>(rows))};
  EXPECT_TRUE(
      quantize_int8_rows(bf16.data(), rows, cols, out.q.data(), out.scales.data(), nullptr));
  return out;
}

// amax 127 gives the scale 1 (127 · f32(1/127) rounds to 1), so codes are rint(w): halves go to
// the even neighbour. amax 1 gives f32(1/127), whose reciprocal is exactly 127: ±0.5 → ±63.5 →
// ±64 (even). An all-zero row has the scale 1 and zero codes.
TEST(Int8Rows, QuantiserRoundsHalvesToEvenWithTheMultipliedReciprocal) {
  const std::vector<float> w = {127, 2.5f, 3.5f,  -2.5f, 126.5f, -0.5f, 0, 1.5f,  //
                                1,   0.5f, -0.5f, -1,    0.25f,  0,     0, 0,     //
                                0,   0,    0,     0,     0,      0,     0, 0};
  const Quantised got = quantise(w, 3, 8);
  EXPECT_EQ(got.scales[0], 1.0f);
  EXPECT_EQ(got.scales[1], 1.0f * (1.0f / 127.0f));
  EXPECT_EQ(got.scales[2], 1.0f);
  const std::vector<std::int8_t> expected = {127, 2,  4,   -2,   126, 0, 0, 2,  //
                                             127, 64, -64, -127, 32,  0, 0, 0,  //
                                             0,   0,  0,   0,    0,   0, 0, 0};
  EXPECT_EQ(got.q, expected);
}

// No code leaves ±127 even where amax · f32(1/127) rounds down and the reciprocal overshoots.
TEST(Int8Rows, RowsThatAreNotFiniteAreRefused) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::vector<std::uint16_t> w = {f32_to_bf16(1.0f), f32_to_bf16(bad)};
    std::vector<std::int8_t> q(2);
    float scale = 0;
    EXPECT_FALSE(quantize_int8_rows(w.data(), 1, 2, q.data(), &scale, nullptr)) << bad;
  }
}

TEST(Int8Rows, CodesStayWithinPlusMinus127) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> w(64 * 40);
  for (float& v : w) v = bf16_to_f32(f32_to_bf16(u(rng)));
  const Quantised got = quantise(w, 64, 40);
  for (std::size_t r = 0; r < 64; ++r) {
    int amax_code = 0;
    for (std::size_t c = 0; c < 40; ++c) {
      const int q = got.q[r * 40 + c];
      ASSERT_LE(std::abs(q), 127);
      amax_code = std::max(amax_code, std::abs(q));
      // Within half a step (and the reciprocal's rounding) of the value.
      ASSERT_NEAR(got.scales[r] * static_cast<float>(q), w[r * 40 + c], 0.51f * got.scales[r]);
    }
    EXPECT_EQ(amax_code, 127) << "row " << r;  // the largest weight takes the largest code
  }
}

struct Problem {
  std::vector<std::int8_t> q;
  std::vector<float> scales;
  Int8RowsMatrix w;
  std::vector<float> x;
};

Problem problem(int64_t rows, int64_t cols, int64_t n_rows, unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.q.resize(static_cast<std::size_t>(rows * cols));
  for (auto& v : p.q) v = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  for (int64_t r = 0; r < rows; ++r) p.scales.push_back(scale(rng));
  p.w = {p.q.data(), p.scales.data(), rows, cols};
  std::normal_distribution<float> normal;
  p.x.resize(static_cast<std::size_t>(n_rows * cols));
  for (float& v : p.x) v = normal(rng);
  return p;
}

// The documented order: lane c mod 8 accumulates fma(q_c, x_c) in increasing c; lanes summed; the
// row's scale times the sum.
float replay(const Int8RowsMatrix& w, int64_t r, const float* x) {
  float lanes[8] = {};
  for (int64_t c = 0; c < w.cols; ++c) {
    lanes[c % 8] = std::fma(static_cast<float>(w.row(r)[c]), x[c], lanes[c % 8]);
  }
  return w.scales[r] * lane_sum8(lanes);
}

TEST(Int8Matmul, EveryPathFollowsTheDocumentedOrderBitwise) {
  for (const int64_t n_rows : {1, 6, 9}) {
    const int64_t rows = 37, cols = 104;  // remainders to every grouping
    Problem p = problem(rows, cols, n_rows, 7);
    for (const Isa isa : available_isas()) {
      std::vector<float> y(static_cast<std::size_t>(n_rows * rows), -1.0f);
      int8_tile_for(isa)(p.w, 0, rows, p.x.data(), cols, n_rows, MatmulOut{y.data(), rows, false});
      for (int64_t n = 0; n < n_rows; ++n) {
        for (int64_t r = 0; r < rows; ++r) {
          const float expected = replay(p.w, r, p.x.data() + n * cols);
          ASSERT_EQ(std::memcmp(&y[static_cast<std::size_t>(n * rows + r)], &expected, 4), 0)
              << isa_name(isa) << " row " << n << " output " << r;
        }
      }
    }
  }
}

// Against float64 maths: close, and the same kernel with every row scale set to 1 (a product
// that forgot the scales) is far off.
TEST(Int8Matmul, MatchesFloat64AndNeedsTheRowScale) {
  const int64_t rows = 16, cols = 256;
  Problem p = problem(rows, cols, 1, 5);
  std::vector<float> y(static_cast<std::size_t>(rows)), unscaled(y.size());
  int8_matmul(p.w, p.x.data(), 1, y.data(), nullptr);
  const std::vector<float> ones(static_cast<std::size_t>(rows), 1.0f);
  Int8RowsMatrix forgot = p.w;
  forgot.scales = ones.data();
  int8_matmul(forgot, p.x.data(), 1, unscaled.data(), nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    double exact = 0, magnitude = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double term = static_cast<double>(p.scales[static_cast<std::size_t>(r)]) *
                          p.w.row(r)[c] * p.x[static_cast<std::size_t>(c)];
      exact += term;
      magnitude += std::fabs(term);
    }
    EXPECT_NEAR(y[static_cast<std::size_t>(r)], exact, 1e-6 * magnitude) << r;
    EXPECT_GT(std::fabs(unscaled[static_cast<std::size_t>(r)] - exact), 1e-2 * magnitude)
        << "negative control, row " << r;
  }
}

TEST(Int8Matmul, RowsInABatchOrATileEqualTheRowsAlone) {
  const int64_t rows = 64, cols = 128, n_rows = 5;
  Problem p = problem(rows, cols, n_rows, 11);
  std::vector<float> batched(static_cast<std::size_t>(n_rows * rows));
  ThreadPool pool(2);
  int8_matmul(p.w, p.x.data(), n_rows, batched.data(), &pool);
  for (int64_t n = 0; n < n_rows; ++n) {
    std::vector<float> alone(static_cast<std::size_t>(rows), 5.0f);
    // Two tiles, the second accumulating onto a copy of the first's outputs' zero.
    int8_matmul_tile(p.w, 0, 29, p.x.data() + n * cols, cols, 1,
                     MatmulOut{alone.data(), rows, false});
    std::fill(alone.begin() + 29, alone.end(), 0.0f);
    int8_matmul_tile(p.w, 29, rows, p.x.data() + n * cols, cols, 1,
                     MatmulOut{alone.data(), rows, true});
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(alone[static_cast<std::size_t>(r)], batched[static_cast<std::size_t>(n * rows + r)])
          << n << " " << r;
    }
  }
}

TEST(Int8Matmul, WeightMatrixRunsAndReadsInt8Rows) {
  const int64_t rows = 12, cols = 64;
  Problem p = problem(rows, cols, 3, 13);
  const WeightMatrix m = WeightMatrix::of(p.w);
  EXPECT_EQ(m.format_name(), "int8");
  // A row streams its codes and its f32 scale.
  EXPECT_EQ(m.bytes(0, rows), static_cast<std::size_t>(rows * (cols + 4)));
  std::vector<float> direct(static_cast<std::size_t>(3 * rows)), through(direct.size());
  int8_matmul(p.w, p.x.data(), 3, direct.data(), nullptr);
  matmul(m, p.x.data(), 3, through.data(), nullptr);
  EXPECT_EQ(direct, through);
  std::vector<float> tiled(direct.size());
  weight_tile(m, 0, rows, p.x.data(), cols, 3, MatmulOut{tiled.data(), rows, false});
  EXPECT_EQ(direct, tiled);
  std::vector<float> row(static_cast<std::size_t>(cols));
  ASSERT_TRUE(row_to_f32(m, 7, row.data()));
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(row[static_cast<std::size_t>(c)], p.scales[7] * static_cast<float>(p.w.row(7)[c]));
  }
}

}  // namespace
}  // namespace md::kernels
