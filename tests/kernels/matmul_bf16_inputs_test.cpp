// The opt-in bf16-input path (MatmulInputs::kBf16, kernels/matmul_avx512_bf16.cpp): accuracy
// against an oracle of the rounded inputs (and not the unrounded ones), the determinism contract,
// and the switch between the modes. Skipped on CPUs without AVX512-BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "../support/matmul_inputs_support.h"
#include "base/dtype.h"
#include "base/error.h"
#include "kernel_test_util.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "matmul_problem.h"

namespace md::kernels {
namespace {

using Problem = test::MatmulProblem;
using test::random_floats;

bool cpu_runs_bf16_inputs() {
  return bf16_inputs_refusal(best_isa(), has_avx512_bf16()).empty();
}

#define SKIP_WITHOUT_AVX512_BF16() \
  if (!cpu_runs_bf16_inputs()) GTEST_SKIP() << "the CPU lacks AVX512-BF16 (or AVX-512)"

const MatmulKernels& bf16_inputs() {
#if defined(__x86_64__)
  return kMatmulAvx512Bf16;
#else
  return matmul_kernels(Isa::kScalar);  // never reached: the tests skip
#endif
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Column counts around the step (32), the lane width (16), below one step, and long enough that a
// pass with many input rows takes several column chunks.
constexpr int64_t kColumnCases[] = {1,  5,  15, 16, 17, 31,  32,  33,
                                    47, 63, 64, 65, 77, 512, 519, 1031};

// Roundings on the path of any one product: products of two bf16 values are exact in f32; each
// vdpbf16ps adds its lane's two products to the accumulator with at most two roundings (the SDM's
// two sequential adds; a fused evaluation rounds less), one instruction per 32 columns; then four
// for the 16-lane tree and one for accumulate. With u = 2^-24 every output is within
// k·u / (1 - k·u) · Σ|terms| of the exact sum (Higham, Accuracy and Stability, §3.1). That is
// about (cols/16) · 2^-24 · Σ|w·x|: c = 1/16 in a bound c · cols · 2^-24 · Σ|w·x|, since each
// lane sees cols/16 of the columns.
double error_bound(int64_t cols, bool accumulate, double magnitude) {
  const double k = 2.0 * static_cast<double>((cols + 31) / 32) + 4 + (accumulate ? 1 : 0);
  const double u = std::ldexp(1.0, -24);
  return k * u / (1 - k * u) * magnitude;
}

double rounded(float x) {
  return static_cast<double>(bf16_to_f32(f32_to_bf16(x)));
}

// Largest error / bound over every output of one product, against the oracle Σ bf16(w)·x' with
// x' = bf16(x) (round_inputs) or x' = x.
double worst_error_ratio(const Problem& p, const std::vector<float>& y,
                         const std::vector<float>& before, int64_t y_stride, bool accumulate,
                         bool round_inputs) {
  double worst = 0;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t r = 0; r < p.rows; ++r) {
      auto at = static_cast<std::size_t>(n * y_stride + r);
      double sum = accumulate ? before[at] : 0.0;
      double magnitude = std::abs(sum);
      for (int64_t c = 0; c < p.cols; ++c) {
        float x = p.x()[n * p.x_stride + c];
        double term = p.weight(r, c) * (round_inputs ? rounded(x) : static_cast<double>(x));
        sum += term;
        magnitude += std::abs(term);
      }
      worst = std::max(worst, std::abs(y[at] - sum) / error_bound(p.cols, accumulate, magnitude));
    }
  }
  return worst;
}

TEST(MatmulBf16Inputs, MatchesTheOracleOfRoundedInputsAndNotOfUnroundedOnes) {
  SKIP_WITHOUT_AVX512_BF16();
  double worst_rounded = 0, least_unrounded = 1e30;
  for (int64_t cols : kColumnCases) {
    for (int64_t batch = 1; batch <= 16; ++batch) {
      const bool accumulate = batch % 2 == 0;
      Problem p(37, cols, batch, static_cast<uint64_t>(cols * 100 + batch));
      const int64_t y_stride = p.rows + 2;
      std::vector<float> y = random_floats(static_cast<std::size_t>(p.n * y_stride), 99);
      const std::vector<float> before = y;
      bf16_inputs().tile(p.matrix(), 0, p.rows, p.x(), p.x_stride, p.n,
                         MatmulOut{y.data(), y_stride, accumulate});
      double ratio = worst_error_ratio(p, y, before, y_stride, accumulate, true);
      ASSERT_LE(ratio, 1.0) << "cols " << cols << " batch " << batch;
      // Negative control: the inputs really are rounded, far beyond the accumulation's error.
      double unrounded = worst_error_ratio(p, y, before, y_stride, accumulate, false);
      ASSERT_GT(unrounded, 1.0) << "cols " << cols << " batch " << batch;
      worst_rounded = std::max(worst_rounded, ratio);
      least_unrounded = std::min(least_unrounded, unrounded);
      // The padding between output rows is never written.
      for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t r = p.rows; r < y_stride; ++r) {
          auto at = static_cast<std::size_t>(n * y_stride + r);
          ASSERT_EQ(y[at], before[at]);
        }
      }
    }
  }
  std::printf(
      "error / bound: at most %.3g against rounded inputs, at least "
      "%.3g against unrounded\n",
      worst_rounded, least_unrounded);
  RecordProperty("worst_error_over_bound", std::to_string(worst_rounded));
}

// The product computed one output at a time, input rows unpacked: the reference every other split
// must equal.
std::vector<float> one_by_one(const Problem& p) {
  std::vector<float> y(static_cast<std::size_t>(p.n * p.rows), -7.0f);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t r = 0; r < p.rows; ++r) {
      bf16_inputs().tile(p.matrix(), r, r + 1, p.x() + n * p.x_stride, p.x_stride, 1,
                         MatmulOut{y.data() + n * p.rows, p.rows, false});
    }
  }
  return y;
}

// The inputs again with x_stride = cols (packed), at an aligned address.
std::vector<float> packed_inputs(const Problem& p) {
  std::vector<float> packed(static_cast<std::size_t>(p.n * p.cols));
  for (int64_t n = 0; n < p.n; ++n) {
    std::memcpy(packed.data() + n * p.cols, p.x() + n * p.x_stride,
                static_cast<std::size_t>(p.cols) * sizeof(float));
  }
  return packed;
}

TEST(MatmulBf16Inputs, OutputIsBitwiseIndependentOfBatchTilingStrideAndChunks) {
  SKIP_WITHOUT_AVX512_BF16();
  // 8201 columns: one chunk for a single input row, dozens for 16.
  for (int64_t cols : {7, 77, 1031, 8201}) {
    Problem p(45, cols, 17, 3 + static_cast<uint64_t>(cols));
    const std::vector<float> reference = one_by_one(p);
    const std::vector<float> packed = packed_inputs(p);
    const std::vector<std::vector<int64_t>> tilings = {
        {0, 45}, {0, 5, 13, 14, 40, 45}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 45}};
    for (int64_t batch = 1; batch <= 17; ++batch) {
      for (const auto& cuts : tilings) {
        for (bool pack : {false, true}) {
          // A batch of the first `batch` inputs; rows of a prefix must not see the rows after it.
          std::vector<float> y(static_cast<std::size_t>(batch * p.rows), -7.0f);
          for (std::size_t t = 0; t + 1 < cuts.size(); ++t) {
            bf16_inputs().tile(p.matrix(), cuts[t], cuts[t + 1], pack ? packed.data() : p.x(),
                               pack ? p.cols : p.x_stride, batch,
                               MatmulOut{y.data(), p.rows, false});
          }
          std::vector<float> expected(reference.begin(),
                                      reference.begin() + static_cast<std::ptrdiff_t>(y.size()));
          ASSERT_TRUE(same_bits(y, expected)) << "cols " << cols << " batch " << batch << " tiles "
                                              << cuts.size() - 1 << " packed " << pack;
        }
      }
    }
    // Accumulating adds the same sum once: y0 + s in f32, whatever the batch.
    std::vector<float> base = random_floats(reference.size(), 5);
    std::vector<float> y = base;
    bf16_inputs().tile(p.matrix(), 0, p.rows, p.x(), p.x_stride, p.n,
                       MatmulOut{y.data(), p.rows, true});
    for (std::size_t i = 0; i < y.size(); ++i) {
      float expected = base[i] + reference[i];
      ASSERT_EQ(0, std::memcmp(&y[i], &expected, sizeof(float))) << "accumulate, output " << i;
    }
    // The path's dot is one output of the same kernel.
    for (int64_t r = 0; r < p.rows; ++r) {
      float dot = bf16_inputs().dot(p.matrix().row(r), p.x(), cols);
      ASSERT_EQ(0, std::memcmp(&dot, &reference[static_cast<std::size_t>(r)], sizeof(float)))
          << "dot row " << r;
    }
  }
}

// Inputs whose rounding is decided by the last bits: ties to even, the carry into the exponent, and
// values that are bf16 already. The kernel must round exactly as f32_to_bf16 does.
TEST(MatmulBf16Inputs, RoundsInputsToNearestEven) {
  SKIP_WITHOUT_AVX512_BF16();
  const uint32_t patterns[] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u,
                               0x3fffffffu, 0xbf808000u, 0xbf818000u, 0x40490fdbu};
  for (uint32_t bits : patterns) {
    const float x = std::bit_cast<float>(bits);
    const uint16_t one = f32_to_bf16(1.0f);
    std::vector<uint16_t> w(33, 0);
    std::vector<float> inputs(33, 0.0f);
    // The value alone in a full step and in the tail: w = 1 picks it out exactly.
    for (int64_t column : {int64_t{3}, int64_t{32}}) {
      std::fill(w.begin(), w.end(), uint16_t{0});
      std::fill(inputs.begin(), inputs.end(), 0.0f);
      w[static_cast<std::size_t>(column)] = one;
      inputs[static_cast<std::size_t>(column)] = x;
      float y = bf16_inputs().dot(w.data(), inputs.data(), 33);
      EXPECT_EQ(std::bit_cast<uint32_t>(y), static_cast<uint32_t>(f32_to_bf16(x)) << 16)
          << std::hex << bits << " at column " << std::dec << column;
    }
  }
}

// The mode is a property of the matrix: the same weights tagged kBf16 take the bf16-input path
// through every entry point, untagged the f32 one, side by side in one process.
TEST(MatmulBf16Inputs, ATaggedMatrixTakesTheBf16PathAnUntaggedOneTheF32Path) {
  if (!test::bf16_matmul_inputs_supported()) GTEST_SKIP() << "kBf16 cannot run here";
  Problem p(300, 515, 8, 11);
  const std::vector<float> packed = packed_inputs(p);
  Bf16Matrix f32_matrix = p.matrix();
  Bf16Matrix bf16_matrix = p.matrix();
  bf16_matrix.inputs = MatmulInputs::kBf16;
  const auto product = [&](const Bf16Matrix& m, ThreadPool* pool) {
    std::vector<float> y(static_cast<std::size_t>(p.n * p.rows));
    matmul(m, packed.data(), p.n, y.data(), pool);
    return y;
  };
  const auto tile_of = [&](const MatmulKernels& kernels) {
    std::vector<float> y(static_cast<std::size_t>(p.n * p.rows));
    kernels.tile(p.matrix(), 0, p.rows, packed.data(), p.cols, p.n, MatmulOut{y.data(), p.rows});
    return y;
  };
  ThreadPool pool(3);
  const std::vector<float> f32 = tile_of(matmul_kernels(active_isa_level()));
  const std::vector<float> expected = tile_of(bf16_inputs());
  EXPECT_FALSE(same_bits(expected, f32));
  EXPECT_TRUE(same_bits(product(f32_matrix, &pool), f32));
  EXPECT_TRUE(same_bits(product(bf16_matrix, &pool), expected));
  EXPECT_TRUE(same_bits(product(bf16_matrix, nullptr), expected));
  std::vector<float> rows(expected.size()), tiled(expected.size());
  matmul_rows(bf16_matrix, packed.data(), p.n, rows.data(), 0, 111);
  matmul_rows(bf16_matrix, packed.data(), p.n, rows.data(), 111, p.rows);
  EXPECT_TRUE(same_bits(rows, expected));
  matmul_tile(bf16_matrix, 0, p.rows, packed.data(), p.cols, p.n, MatmulOut{tiled.data(), p.rows});
  EXPECT_TRUE(same_bits(tiled, expected));
  // A row computed alone equals the same row in the threaded block.
  for (int64_t n = 0; n < p.n; ++n) {
    std::vector<float> alone(static_cast<std::size_t>(p.rows));
    matmul(bf16_matrix, packed.data() + n * p.cols, 1, alone.data(), nullptr);
    EXPECT_EQ(0,
              std::memcmp(alone.data(), expected.data() + n * p.rows, alone.size() * sizeof(float)))
        << "row " << n;
  }
  // The f32 matrix is untouched by its tagged twin.
  EXPECT_TRUE(same_bits(product(f32_matrix, nullptr), f32));
}

TEST(MatmulBf16Inputs, RefusedWithoutAvx512Bf16OrBelowTheAvx512Path) {
  EXPECT_EQ(bf16_inputs_refusal(Isa::kAvx512, true), "");
  EXPECT_NE(bf16_inputs_refusal(Isa::kAvx512, false).find("AVX512-BF16"), std::string::npos);
  EXPECT_NE(bf16_inputs_refusal(Isa::kAvx2, true).find("avx2"), std::string::npos);
  EXPECT_NE(bf16_inputs_refusal(Isa::kScalar, true).find("scalar"), std::string::npos);
  // check_matmul_inputs applies the same test to this process (ctest also runs the CLI with
  // MEGADECODE_ISA=avx2, where it refuses).
  if (test::bf16_matmul_inputs_supported()) {
    EXPECT_NO_THROW(check_matmul_inputs(MatmulInputs::kBf16));
  } else {
    EXPECT_THROW(check_matmul_inputs(MatmulInputs::kBf16), Error);
  }
  EXPECT_NO_THROW(check_matmul_inputs(MatmulInputs::kF32));
}

// CPUID agrees with the kernel's own list of the CPU's flags, where there is one.
TEST(MatmulBf16Inputs, CpuidDetectionAgreesWithProcCpuinfo) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const bool listed = (line + " ").find(" avx512_bf16 ") != std::string::npos;
    EXPECT_EQ(has_avx512_bf16(), listed);
    return;
  }
  GTEST_SKIP() << "no /proc/cpuinfo flags";
}

}  // namespace
}  // namespace md::kernels
