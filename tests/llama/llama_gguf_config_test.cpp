#include "models/llama/llama_gguf_config.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "../io/gguf_test_util.h"
#include "base/error.h"

namespace md {
namespace {

namespace fs = std::filesystem;

std::string smollm2_path() {
  return std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(LlamaGgufConfig, ReadsSmolLM2) {
  if (!fs::exists(smollm2_path()))
    GTEST_SKIP() << smollm2_path() << " is absent: run scripts/setup";
  GgufFile file(smollm2_path());
  LlamaConfig c = parse_llama_gguf_config(file);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_attention_heads, 9);
  EXPECT_EQ(c.num_key_value_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 100000.0);
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
}

// A minimal llama GGUF; `edit` changes or drops keys before building.
std::string write_gguf(const fs::path& path,
                       const std::function<void(testing::GgufBuilder&)>& extra,
                       const std::string& architecture = "llama", uint32_t kv_heads = 2,
                       uint32_t rope_dim = 16) {
  testing::GgufBuilder builder;
  builder.string("general.architecture", architecture)
      .u32("llama.block_count", 2)
      .u32("llama.embedding_length", 64)
      .u32("llama.feed_forward_length", 128)
      .u32("llama.attention.head_count", 4)
      .u32("llama.attention.head_count_kv", kv_heads)
      .u32("llama.context_length", 256)
      .u32("llama.vocab_size", 100);
  std::vector<uint8_t> eps;
  float value = 1e-5f;
  eps.resize(4);
  std::memcpy(eps.data(), &value, 4);
  builder.raw("llama.attention.layer_norm_rms_epsilon", 6, eps);
  builder.u32("llama.rope.dimension_count", rope_dim);
  extra(builder);
  std::vector<uint8_t> bytes = builder.build();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

std::string error_of(const std::string& path) {
  try {
    parse_llama_gguf_config(GgufFile(path));
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

class LlamaGgufRefusals : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("md_llama_gguf_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
};

TEST_F(LlamaGgufRefusals, MinimalFileParses) {
  LlamaConfig c = parse_llama_gguf_config(GgufFile(write_gguf(dir_ / "ok.gguf", [](auto&) {})));
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.gqa_group(), 2);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST_F(LlamaGgufRefusals, EachProblemIsNamed) {
  auto expect = [&](const std::string& path, const std::string& needle) {
    std::string message = error_of(path);
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  };
  expect(write_gguf(
             dir_ / "arch.gguf", [](auto&) {}, "qwen2"),
         "general.architecture");
  expect(write_gguf(
             dir_ / "rope.gguf", [](auto&) {}, "llama", 2, 8),
         "partial rotary");
  expect(write_gguf(dir_ / "scaling.gguf",
                    [](auto& b) { b.string("llama.rope.scaling.type", "yarn"); }),
         "RoPE scaling");
  expect(write_gguf(dir_ / "eos.gguf", [](auto& b) { b.u32("tokenizer.ggml.eos_token_id", 100); }),
         "outside the vocabulary");
  expect(write_gguf(
             dir_ / "kv.gguf", [](auto&) {}, "llama", 3),
         "does not divide");
}

}  // namespace
}  // namespace md
