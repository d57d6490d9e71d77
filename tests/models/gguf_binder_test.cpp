// Stacked GGUF tensors (a MoE layer's experts, ggml order [cols, rows, count]) bound as one
// matrix per expert in place, and the errors that name a missing or misshapen stack.
#include "models/common/gguf_binder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../io/gguf_test_util.h"
#include "base/error.h"
#include "kernels/weight_matrix.h"

namespace md {
namespace {

namespace fs = std::filesystem;
constexpr std::uint32_t kGgmlF32 = 0;

// A file with one F32 stack "blk.0.ffn_up_exps.weight" of 2 experts × 3 rows × 4 columns whose
// element (e, r, c) is 100e + 10r + c, and a 2-D tensor "flat" [4, 6].
class GgufStack : public ::testing::Test {
 protected:
  fs::path path_ = fs::temp_directory_path() / ("md_gguf_stack_" + std::to_string(::getpid()));
  void SetUp() override {
    std::vector<std::uint8_t> bytes(2 * 3 * 4 * 4);
    for (int e = 0; e < 2; ++e) {
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 4; ++c) {
          const float v = static_cast<float>(100 * e + 10 * r + c);
          std::memcpy(bytes.data() + ((e * 3 + r) * 4 + c) * 4, &v, 4);
        }
      }
    }
    testing::GgufBuilder b;
    b.string("general.architecture", "qwen35moe");
    b.tensor({"blk.0.ffn_up_exps.weight", kGgmlF32, {4, 3, 2}, bytes});
    b.tensor({"flat", kGgmlF32, {4, 6}, bytes});
    const std::vector<std::uint8_t> file = b.build();
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(file.data()),
               static_cast<std::streamsize>(file.size()));
  }
  void TearDown() override { fs::remove(path_); }

  std::string error_of(const std::string& name, int64_t count, int64_t rows, int64_t cols) {
    try {
      bind_gguf_stack(GgufFile(path_.string()), name, count, rows, cols, "qwen35moe");
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
};

TEST_F(GgufStack, EachExpertIsItsRowsOfTheStack) {
  GgufFile file(path_.string());
  const auto experts = bind_gguf_stack(file, "blk.0.ffn_up_exps.weight", 2, 3, 4, "qwen35moe");
  ASSERT_EQ(experts.size(), 2u);
  std::vector<float> row(4);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(experts[static_cast<std::size_t>(e)].rows, 3);
    EXPECT_EQ(experts[static_cast<std::size_t>(e)].cols, 4);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(kernels::row_to_f32(
          kernels::WeightMatrix::of(experts[static_cast<std::size_t>(e)]), r, row.data()));
      for (int c = 0; c < 4; ++c) EXPECT_EQ(row[static_cast<std::size_t>(c)], 100 * e + 10 * r + c);
    }
  }
}

TEST_F(GgufStack, MissingOrMisshapenStacksAreNamed) {
  EXPECT_NE(error_of("blk.0.ffn_down_exps.weight", 2, 3, 4)
                .find("tensor 'blk.0.ffn_down_exps.weight' is missing (qwen35moe needs it)"),
            std::string::npos);
  const std::string wrong_count = error_of("blk.0.ffn_up_exps.weight", 3, 3, 4);
  EXPECT_NE(wrong_count.find("but the metadata implies [4, 3, 3] (ggml order)"), std::string::npos)
      << wrong_count;
  const std::string flat = error_of("flat", 2, 3, 4);
  EXPECT_NE(flat.find("tensor 'flat' is"), std::string::npos) << flat;
  EXPECT_NE(flat.find("but the metadata implies [4, 3, 2] (ggml order)"), std::string::npos)
      << flat;
}

}  // namespace
}  // namespace md
