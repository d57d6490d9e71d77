// MXFP4 (kernels/mxfp4.h, docs §9 of the Kimi K3 spec): every code and the scale bytes decode as
// OCP MX FP4 defines them, the products follow their documented order bitwise on every path this
// CPU runs, and equal the dense dequantised product within f32 summation error.
#include "kernels/mxfp4_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/lane_sum8.h"
#include "kernels/mxfp4.h"
#include "kernels/mxfp4_matmul_kernels.h"
#include "kernels/weight_matrix.h"

namespace md::kernels {
namespace {

// The spec's magnitude table, indexed by bits 0-2 of a code.
constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// One row of 32 weights holding codes 0…15 twice, code k at position k and 16 + k.
std::vector<std::uint8_t> every_code_row() {
  std::vector<std::uint8_t> codes(16);
  for (int j = 0; j < 16; ++j) {
    const int low = (2 * j) % 16, high = (2 * j + 1) % 16;
    codes[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(low | (high << 4));
  }
  return codes;
}

TEST(Mxfp4, AllSixteenCodesDecodeAndScales127And128GiveOneAndTwo) {
  const std::vector<std::uint8_t> codes = every_code_row();
  for (const auto& [scale_byte, factor] : {std::pair{127, 1.0f}, std::pair{128, 2.0f}}) {
    const std::uint8_t scale = static_cast<std::uint8_t>(scale_byte);
    float row[32];
    dequantize_mxfp4_row(codes.data(), &scale, 32, row);
    for (int k = 0; k < 32; ++k) {
      const int code = k % 16;
      const float expected = (code & 8 ? -1.0f : 1.0f) * kMagnitudes[code & 7] * factor;
      EXPECT_EQ(row[k], expected) << "code " << code << " scale " << scale_byte;
      EXPECT_EQ(std::signbit(row[k]), code >= 8) << "code " << code;  // code 8 is −0
    }
  }
}

// Element 2j sits in the low nibble of byte j, 2j + 1 in the high one; the scale of group g covers
// elements 32g … 32g + 31 (a decoder with the nibbles or the groups swapped fails here).
TEST(Mxfp4, NibbleOrderAndScaleGroups) {
  std::vector<std::uint8_t> codes(32, 0);
  codes[0] = 0x21;   // element 0: code 1 (0.5), element 1: code 2 (1.0)
  codes[16] = 0x07;  // element 32 (group 1): code 7 (6.0), element 33: 0
  const std::uint8_t scales[2] = {127, 130};
  float row[64];
  dequantize_mxfp4_row(codes.data(), scales, 64, row);
  EXPECT_EQ(row[0], 0.5f);
  EXPECT_EQ(row[1], 1.0f);
  EXPECT_EQ(row[32], 48.0f);
  EXPECT_EQ(row[33], 0.0f);
}

TEST(Mxfp4, E8m0ScaleBytesArePowersOfTwoAndTheEndsAreRefused) {
  EXPECT_EQ(kE8m0Values[127], 1.0f);
  EXPECT_EQ(kE8m0Values[128], 2.0f);
  EXPECT_EQ(kE8m0Values[120], 1.0f / 128.0f);
  EXPECT_EQ(kE8m0Values[1], std::ldexp(1.0f, -126));
  EXPECT_EQ(kE8m0Values[0], std::ldexp(1.0f, -127));  // OCP's value, an f32 subnormal
  EXPECT_EQ(kE8m0Values[254], std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(kE8m0Values[255]));
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(e8m0_is_refused(static_cast<std::uint8_t>(e)), e == 0 || e == 255) << e;
  }
}

struct Problem {
  std::vector<std::uint8_t> codes, scales;
  Mxfp4Matrix w;
  std::vector<float> x;
};

// Random codes (all 16, −0 included) and scales in 120…130, as the test configuration's experts.
Problem problem(int64_t rows, int64_t cols, int64_t n_rows, unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.codes.resize(static_cast<std::size_t>(rows * cols / 2));
  p.scales.resize(static_cast<std::size_t>(rows * cols / 32));
  for (auto& c : p.codes) c = static_cast<std::uint8_t>(rng());
  std::uniform_int_distribution<int> scale_byte(120, 130);
  for (auto& s : p.scales) s = static_cast<std::uint8_t>(scale_byte(rng));
  p.w = {p.codes.data(), p.scales.data(), rows, cols};
  std::normal_distribution<float> normal;
  p.x.resize(static_cast<std::size_t>(n_rows * cols));
  for (float& v : p.x) v = normal(rng);
  return p;
}

std::vector<float> dequantized(const Mxfp4Matrix& w, int64_t r) {
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  dequantize_mxfp4_row(w.row_codes(r), w.row_scales(r), w.cols, row.data());
  return row;
}

// The documented order: lane k mod 8 accumulates fma(w_k, x_k) in increasing k; lanes summed.
float replay(const Mxfp4Matrix& w, int64_t r, const float* x) {
  const std::vector<float> row = dequantized(w, r);
  float lanes[8] = {};
  for (int64_t k = 0; k < w.cols; ++k) {
    lanes[k % 8] = std::fma(row[static_cast<std::size_t>(k)], x[k], lanes[k % 8]);
  }
  return lane_sum8(lanes);
}

// One activation row (output rows side by side), a partial group of rows, and more rows than one
// group holds; 37 output rows leave a remainder to every grouping.
TEST(Mxfp4Matmul, EveryPathFollowsTheDocumentedOrderBitwise) {
  const int64_t rows = 37, cols = 96;
  for (const int64_t n_rows : {1, 6, 9}) {
    Problem p = problem(rows, cols, n_rows, 7);
    for (const Isa isa : available_isas()) {
      std::vector<float> y(static_cast<std::size_t>(n_rows * rows), -1.0f);
      mxfp4_tile_for(isa)(p.w, 0, rows, p.x.data(), cols, n_rows, {y.data(), rows, false});
      for (int64_t n = 0; n < n_rows; ++n) {
        for (int64_t r = 0; r < rows; ++r) {
          const float expected = replay(p.w, r, p.x.data() + n * cols);
          ASSERT_EQ(std::memcmp(&y[static_cast<std::size_t>(n * rows + r)], &expected, 4), 0)
              << isa_name(isa) << " rows " << n_rows << " row " << n << " output " << r;
        }
      }
    }
  }
}

// §15: a fused expert GEMV equals the dense dequantised GEMV at 2e-5 (here against float64 sums
// of the dequantised weights, relative to the sum of |products|, the scale of f32 order noise).
// Negative control: scales read one group late miss the bound by far.
TEST(Mxfp4Matmul, EqualsTheDenseDequantisedProduct) {
  const int64_t rows = 64, cols = 1792, n_rows = 3;
  Problem p = problem(rows, cols, n_rows, 13);
  std::vector<float> y(static_cast<std::size_t>(n_rows * rows));
  ThreadPool pool(2);
  mxfp4_matmul(p.w, p.x.data(), n_rows, y.data(), &pool);
  std::vector<std::uint8_t> late(p.scales.begin() + 1, p.scales.end());
  late.push_back(p.scales.front());  // each group's scale read one group late
  Mxfp4Matrix shifted = p.w;
  shifted.scales = late.data();
  std::vector<float> y_shifted(static_cast<std::size_t>(n_rows * rows));
  mxfp4_matmul(shifted, p.x.data(), n_rows, y_shifted.data(), nullptr);
  double worst = 0, worst_shifted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row = dequantized(p.w, r);
    for (int64_t n = 0; n < n_rows; ++n) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double product = double{row[static_cast<std::size_t>(k)]} * p.x[n * cols + k];
        sum += product;
        magnitude += std::fabs(product);
      }
      const auto at = static_cast<std::size_t>(n * rows + r);
      worst = std::max(worst, std::fabs(y[at] - sum) / magnitude);
      worst_shifted = std::max(worst_shifted, std::fabs(y_shifted[at] - sum) / magnitude);
    }
  }
  EXPECT_LE(worst, 2e-5);
  EXPECT_GT(worst_shifted, 1e-2);
}

// Accumulating adds to what is there; a tile's rows, a batch's rows and threads change nothing;
// the format-tagged view runs the same kernel, dequantises rows as dequantize_mxfp4_row does and
// counts the group scales in its bytes (what a step streams and a waiting worker prefetches).
TEST(Mxfp4Matmul, TheWeightMatrixViewRunsTheMxfp4Kernel) {
  const int64_t rows = 37, cols = 128, n_rows = 3;
  Problem p = problem(rows, cols, n_rows, 5);
  const WeightMatrix w = WeightMatrix::of(p.w);
  EXPECT_EQ(w.format_name(), "MXFP4");
  std::vector<float> direct(n_rows * rows), tiled(n_rows * rows, -1.0f), pooled(n_rows * rows);
  mxfp4_matmul(p.w, p.x.data(), n_rows, direct.data(), nullptr);
  weight_tile(w, 0, 20, p.x.data(), cols, n_rows, {tiled.data(), rows, false});
  weight_tile(w, 20, rows, p.x.data(), cols, n_rows, {tiled.data(), rows, false});
  ThreadPool pool(2);
  matmul(w, p.x.data(), n_rows, pooled.data(), &pool);
  EXPECT_EQ(std::memcmp(direct.data(), tiled.data(), direct.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(direct.data(), pooled.data(), direct.size() * sizeof(float)), 0);
  for (int64_t n = 0; n < n_rows; ++n) {
    std::vector<float> alone(rows, 1.5f);
    mxfp4_matmul_tile(p.w, 3, 30, p.x.data() + n * cols, cols, 1, {alone.data(), rows, true});
    for (int64_t r = 3; r < 30; ++r) {
      EXPECT_EQ(alone[static_cast<std::size_t>(r)],
                1.5f + direct[static_cast<std::size_t>(n * rows + r)]);
    }
  }
  std::vector<float> row(cols);
  ASSERT_TRUE(row_to_f32(w, 5, row.data()));
  EXPECT_EQ(row, dequantized(p.w, 5));
  EXPECT_EQ(w.bytes(0, rows), static_cast<std::size_t>(rows) * (64 + 4));
  EXPECT_EQ(w.bytes(3, 5), 2u * (64 + 4));
}

}  // namespace
}  // namespace md::kernels
