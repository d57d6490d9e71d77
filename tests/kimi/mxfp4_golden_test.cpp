// MXFP4 decoding against compressed-tensors' own `mxfp4-pack-quantized` compressor
// (tools/gen_mxfp4_goldens.py, which the Kimi K3 checkpoint's experts are packed by): its nibble
// unpacking and E8M0 scale decoding, bit for bit on random bytes with every code and scale bytes
// 1, 127, 128 and 254 (0 and 255 are refused at load).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "kernels/mxfp4.h"
#include "kernels/mxfp4_matmul.h"
#include "kernels/weight_matrix.h"

namespace md {
namespace {

std::string golden_path() {
  return std::string(MD_SOURCE_DIR) + "/tests/goldens/kimi/mxfp4-compressed-tensors.safetensors";
}

const TensorView& tensor(const SafetensorsFile& file, const char* name, DType dtype) {
  const TensorView* view = file.find(name);
  if (view == nullptr || view->dtype != dtype) throw std::runtime_error(name);
  return *view;
}

TEST(Mxfp4Golden, DecodingEqualsCompressedTensorsBitForBit) {
  SafetensorsFile file(golden_path());
  const TensorView& packed = tensor(file, "weight_packed", DType::kU8);
  const TensorView& scales = tensor(file, "weight_scale", DType::kU8);
  const TensorView& weight = tensor(file, "weight", DType::kF32);
  const int64_t rows = weight.shape[0], cols = weight.shape[1];
  ASSERT_EQ(packed.shape[1] * 2, cols);
  ASSERT_EQ(scales.shape[1] * kernels::kMxfp4Group, cols);
  std::vector<float> expected(static_cast<std::size_t>(rows * cols));
  std::memcpy(expected.data(), weight.data, weight.nbytes);

  const kernels::Mxfp4Matrix m{packed.data, scales.data, rows, cols};
  const kernels::WeightMatrix w = kernels::WeightMatrix::of(m);
  std::vector<float> row(static_cast<std::size_t>(cols));
  int64_t negative_zeros = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(kernels::row_to_f32(w, r, row.data()));
    for (int64_t c = 0; c < cols; ++c) {
      const float want = expected[static_cast<std::size_t>(r * cols + c)];
      const float got = row[static_cast<std::size_t>(c)];
      ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
          << "row " << r << " column " << c << ": " << got << " vs " << want;
      negative_zeros += want == 0.0f && std::signbit(want);
    }
  }
  EXPECT_GT(negative_zeros, 0);  // code 8 (−0) is among the compared values
}

// The product through the kernel equals the product of compressed-tensors' dense weight within
// f32 order noise (the finite rows: the golden's largest scales overflow some weights to ±inf).
TEST(Mxfp4Golden, TheKernelsProductEqualsTheDenseGoldenProduct) {
  SafetensorsFile file(golden_path());
  const TensorView& packed = tensor(file, "weight_packed", DType::kU8);
  const TensorView& scales = tensor(file, "weight_scale", DType::kU8);
  const TensorView& weight = tensor(file, "weight", DType::kF32);
  const int64_t rows = weight.shape[0], cols = weight.shape[1];
  std::vector<float> dense(static_cast<std::size_t>(rows * cols));
  std::memcpy(dense.data(), weight.data, weight.nbytes);
  std::vector<float> x(static_cast<std::size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(c)] = 0.25f * (c % 7) - 0.7f;
  std::vector<float> y(static_cast<std::size_t>(rows));
  kernels::mxfp4_matmul({packed.data, scales.data, rows, cols}, x.data(), 1, y.data(), nullptr);
  int64_t finite_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, magnitude = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double product = double{dense[static_cast<std::size_t>(r * cols + c)]} * x[c];
      sum += product;
      magnitude += std::fabs(product);
    }
    if (!std::isfinite(magnitude)) continue;
    ++finite_rows;
    EXPECT_LE(std::fabs(y[static_cast<std::size_t>(r)] - sum), 2e-5 * magnitude) << "row " << r;
  }
  EXPECT_GT(finite_rows, rows / 2);
}

}  // namespace
}  // namespace md
