// GgufFile: mapping, typed metadata lookups with precise errors, tensor views and the listing.
#include "io/gguf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "gguf_test_util.h"
#include "io_test_util.h"

namespace md {
namespace {

using testing::error_of;
using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;

std::vector<std::uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<std::uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::string write_model(const TempDir& dir) {
  GgufBuilder b;
  b.string("general.architecture", "llama").u32("llama.block_count", 2);
  b.raw("llama.rope.freq_base", 6, {0, 0x40, 0x1c, 0x46});  // 10000.0f
  b.raw("tokenizer.ggml.add_bos_token", 7, {1});
  b.tensor({"token_embd.weight", 0, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6})});
  b.tensor({"output_norm.weight", 0, {3}, f32_bytes({7, 8, 9})});
  std::string path = dir.str("model.gguf");
  testing::write_bytes(path, b.build());
  return path;
}

TEST(GgufFile, RoundTripsMetadataAndTensorViews) {
  TempDir dir;
  GgufFile file(write_model(dir));
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.string("general.architecture"), "llama");
  EXPECT_EQ(file.integer("llama.block_count"), 2);
  EXPECT_EQ(file.number("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(file.number("llama.block_count"), 2.0);
  EXPECT_TRUE(file.boolean_or("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(file.string_or("general.name", "unnamed"), "unnamed");
  EXPECT_EQ(file.integer_or("llama.context_length", 4096), 4096);
  EXPECT_EQ(file.number_or("llama.eps", 1e-5), 1e-5);
  EXPECT_EQ(file.find("nope"), nullptr);
  ASSERT_EQ(file.tensors().size(), 2u);
  const GgufTensor* embd = file.tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(embd->nbytes, 24u);
  float values[6];
  std::memcpy(values, embd->data, sizeof(values));
  EXPECT_EQ(values[5], 6.0f);
  EXPECT_EQ(file.tensor("output_norm.weight")->offset, embd->offset + 32);
  EXPECT_EQ(file.tensor("missing"), nullptr);
}

TEST(GgufFile, TypedLookupsNameTheFileAndKey) {
  TempDir dir;
  std::string path = write_model(dir);
  GgufFile file(path);
  std::string missing = error_of([&] { file.integer("llama.embedding_length"); });
  EXPECT_THAT(missing, HasSubstr(path));
  EXPECT_THAT(missing, HasSubstr("metadata key 'llama.embedding_length' is missing"));
  EXPECT_THAT(error_of([&] { file.integer("general.architecture"); }),
              HasSubstr("'general.architecture' is string \"llama\", expected an integer"));
  EXPECT_THAT(error_of([&] { file.string_or("llama.block_count", "x"); }),
              HasSubstr("'llama.block_count' is u32 2, expected a string"));
  EXPECT_THAT(error_of([&] { file.boolean_or("llama.block_count", true); }),
              HasSubstr("expected a bool"));
  EXPECT_THAT(error_of([&] { file.number("general.architecture"); }),
              HasSubstr("expected a number"));
}

TEST(GgufFile, DescribeListsMetadataAndTensors) {
  TempDir dir;
  GgufFile file(write_model(dir));
  std::string text = file.describe();
  EXPECT_THAT(text, HasSubstr("GGUF v3, alignment 32, 4 metadata entries, 2 tensors"));
  EXPECT_THAT(text, HasSubstr("general.architecture = string \"llama\""));
  EXPECT_THAT(text, HasSubstr("llama.block_count = u32 2"));
  EXPECT_THAT(text, HasSubstr("token_embd.weight F32 [3, 2] at"));
}

TEST(GgufFile, ErrorsNameThePath) {
  TempDir dir;
  std::string path = dir.str("empty.gguf");
  testing::write_bytes(path, {});
  EXPECT_THAT(error_of([&] { GgufFile file(path); }), HasSubstr(path));
  EXPECT_THAT(error_of([&] { GgufFile file(dir.str("absent.gguf")); }), HasSubstr("absent.gguf"));
}

}  // namespace
}  // namespace md
