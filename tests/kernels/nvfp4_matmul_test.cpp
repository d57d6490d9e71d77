// The NVFP4 products against a replay of their documented order over dequantised rows, bitwise,
// on every path this CPU runs; rows inside a batch equal the same rows alone.
#include "kernels/nvfp4_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/nvfp4.h"
#include "kernels/nvfp4_matmul_kernels.h"
#include "kernels/weight_matrix.h"

namespace md::kernels {
namespace {

struct Problem {
  std::vector<std::uint8_t> codes, scales;
  Nvfp4Matrix w;
  std::vector<float> x;
};

// Random codes (every one of the 16, −0 included) and scales in the range real checkpoints use.
Problem problem(int64_t rows, int64_t cols, int64_t n_rows, unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.codes.resize(static_cast<std::size_t>(rows * cols / 2));
  p.scales.resize(static_cast<std::size_t>(rows * cols / 16));
  for (auto& c : p.codes) c = static_cast<std::uint8_t>(rng());
  std::uniform_int_distribution<int> scale_byte(0x08, 0x7E);  // normal e4m3 values
  for (auto& s : p.scales) s = static_cast<std::uint8_t>(scale_byte(rng));
  p.w = {p.codes.data(), p.scales.data(), rows, cols, 0.0123f};
  std::normal_distribution<float> normal;
  p.x.resize(static_cast<std::size_t>(n_rows * cols));
  for (float& v : p.x) v = normal(rng);
  return p;
}

// The documented order: lane k mod 8 accumulates fma(w_k, x_k) in increasing k; lanes summed.
float replay(const Nvfp4Matrix& w, int64_t r, const float* x) {
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  dequantize_nvfp4_row(w.row_codes(r), w.row_scales(r), w.cols, w.global_scale, row.data());
  float lanes[8] = {};
  for (int64_t k = 0; k < w.cols; ++k) {
    lanes[k % 8] = std::fma(row[static_cast<std::size_t>(k)], x[k], lanes[k % 8]);
  }
  return lane_sum8(lanes);
}

void expect_documented_order(int64_t rows, int64_t cols, int64_t n_rows);

// One activation row (output rows side by side), a partial group of rows, and more rows than one
// group holds; 37 output rows leave a remainder to every grouping.
TEST(Nvfp4Matmul, EveryPathFollowsTheDocumentedOrderBitwise) {
  for (const int64_t n_rows : {1, 6, 9}) {
    expect_documented_order(37, 96, n_rows);
  }
}

void expect_documented_order(int64_t rows, int64_t cols, int64_t n_rows) {
  Problem p = problem(rows, cols, n_rows, 7);
  for (const Isa isa : available_isas()) {
    std::vector<float> y(static_cast<std::size_t>(n_rows * rows), -1.0f);
    nvfp4_tile_for(isa)(p.w, 0, rows, p.x.data(), cols, n_rows, MatmulOut{y.data(), rows, false});
    for (int64_t n = 0; n < n_rows; ++n) {
      for (int64_t r = 0; r < rows; ++r) {
        const float expected = replay(p.w, r, p.x.data() + n * cols);
        ASSERT_EQ(std::memcmp(&y[static_cast<std::size_t>(n * rows + r)], &expected, 4), 0)
            << isa_name(isa) << " row " << n << " output " << r;
      }
    }
  }
}

// Accumulating adds to what is there; a tile's rows, a batch's rows and threads change nothing.
TEST(Nvfp4Matmul, RowsInABatchOrATileEqualTheRowsAlone) {
  const int64_t rows = 64, cols = 256, n_rows = 5;
  Problem p = problem(rows, cols, n_rows, 11);
  std::vector<float> batched(static_cast<std::size_t>(n_rows * rows));
  ThreadPool pool(2);
  nvfp4_matmul(p.w, p.x.data(), n_rows, batched.data(), &pool);
  for (int64_t n = 0; n < n_rows; ++n) {
    std::vector<float> alone(static_cast<std::size_t>(rows), 1.5f);
    nvfp4_matmul_tile(p.w, 3, 40, p.x.data() + n * cols, cols, 1,
                      MatmulOut{alone.data(), rows, true});
    for (int64_t r = 3; r < 40; ++r) {
      EXPECT_EQ(alone[static_cast<std::size_t>(r)],
                1.5f + batched[static_cast<std::size_t>(n * rows + r)]);
    }
  }
}

// Negative control: the global scale is applied (a path that forgot it would fail here).
TEST(Nvfp4Matmul, TheGlobalScaleIsApplied) {
  Problem p = problem(4, 32, 1, 3);
  std::vector<float> y1(4), y2(4);
  nvfp4_matmul(p.w, p.x.data(), 1, y1.data(), nullptr);
  p.w.global_scale *= 2;
  nvfp4_matmul(p.w, p.x.data(), 1, y2.data(), nullptr);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(y2[static_cast<std::size_t>(r)], 2 * y1[static_cast<std::size_t>(r)]);
}

// The format-tagged view a program's tiles and a reference's matmul read: the same bits as the
// NVFP4 kernel, its rows dequantised as dequantize_nvfp4_row gives them, its bytes counting the
// block scales (what a step streams and a waiting worker prefetches).
TEST(Nvfp4Matmul, TheWeightMatrixViewRunsTheNvfp4Kernel) {
  Problem p = problem(37, 64, 3, 5);
  const WeightMatrix w = WeightMatrix::of(p.w);
  EXPECT_EQ(w.format_name(), "NVFP4");
  std::vector<float> direct(3 * 37), tiled(3 * 37, -1.0f), pooled(3 * 37);
  nvfp4_matmul(p.w, p.x.data(), 3, direct.data(), nullptr);
  weight_tile(w, 0, 20, p.x.data(), 64, 3, {tiled.data(), 37, false});
  weight_tile(w, 20, 37, p.x.data(), 64, 3, {tiled.data(), 37, false});
  ThreadPool pool(2);
  matmul(w, p.x.data(), 3, pooled.data(), &pool);
  EXPECT_EQ(std::memcmp(direct.data(), tiled.data(), direct.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(direct.data(), pooled.data(), direct.size() * sizeof(float)), 0);
  std::vector<float> row(64), expected(64);
  ASSERT_TRUE(row_to_f32(w, 5, row.data()));
  dequantize_nvfp4_row(p.w.row_codes(5), p.w.row_scales(5), 64, p.w.global_scale, expected.data());
  EXPECT_EQ(row, expected);
  EXPECT_EQ(w.bytes(0, 37), 37u * (32 + 4));
  EXPECT_EQ(w.bytes(3, 5), 2u * (32 + 4));
}

}  // namespace
}  // namespace md::kernels
