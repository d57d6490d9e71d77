#include "models/llama/llama_config.h"

#include <gtest/gtest.h>

#include "config_test_util.h"

namespace md {
namespace {

using test::Refusal;

LlamaConfig parse(const nlohmann::json& config) {
  return parse_llama_config(config_files_from_json(config));
}

TEST(LlamaConfig, ParsesSmolLM2) {
  LlamaConfig c = parse(test::config_fixture("smollm2-135m"));
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_attention_heads, 9);
  EXPECT_EQ(c.num_key_value_heads, 3);
  EXPECT_EQ(c.head_dim, 64);  // derived: 576 / 9
  EXPECT_EQ(c.gqa_group(), 3);
  EXPECT_DOUBLE_EQ(c.rope_theta, 100000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.weight_format, WeightFormat::kBF16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
}

TEST(LlamaConfig, DefaultsAndExplicitHeadDim) {
  nlohmann::json config = test::config_fixture("smollm2-135m");
  config.erase("num_key_value_heads");
  config.erase("rope_theta");
  config["head_dim"] = 32;
  config["torch_dtype"] = "float32";
  LlamaConfig c = parse(config);
  EXPECT_EQ(c.num_key_value_heads, 9);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.weight_format, WeightFormat::kF32);
}

TEST(LlamaConfig, RefusesUnsupportedSettings) {
  std::vector<Refusal> refusals = {
      {"/hidden_act", "gelu", {"config.json: hidden_act = \"gelu\"", "llama needs \"silu\""}},
      {"/attention_bias", true, {"attention_bias = true"}},
      {"/mlp_bias", true, {"mlp_bias = true"}},
      {"/pretraining_tp", 2, {"pretraining_tp = 2"}},
      {"/rope_scaling",
       {{"rope_type", "llama3"}, {"factor", 8.0}},
       {"rope_scaling.rope_type = \"llama3\"", "needs \"default\""}},
      {"/rope_scaling", {{"type", "linear"}}, {"rope_scaling.type = \"linear\""}},
      {"/num_key_value_heads", 4, {"num_key_value_heads = 4", "divide num_attention_heads = 9"}},
      {"/num_attention_heads", 15, {"num_attention_heads = 15", "must divide hidden_size 576"}},
      {"/head_dim", 63, {"head_dim = 63", "must be even"}},
      {"/torch_dtype", "float8", {"torch_dtype = \"float8\""}},
      {"/quantization_config", {{"quant_method", "awq"}}, {"quantization_config", "GGUF"}},
      {"/eos_token_id", 49152, {"eos_token_id = 49152", "outside the vocabulary"}},
      {"/vocab_size", nullptr, {"vocab_size: missing (required by llama)"}},
      {"/model_type", "mistral", {"model_type = \"mistral\"", "needs \"llama\""}},
  };
  expect_refusals(test::config_fixture("smollm2-135m"), refusals, parse_llama_config);
}

}  // namespace
}  // namespace md
