#include "models/musespark/musespark_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "config_test_util.h"

namespace md {
namespace {

using test::Refusal;

MuseSparkConfig parse(const nlohmann::json& config) {
  return parse_musespark_config(config_files_from_json(config));
}

TEST(MuseSparkConfig, ParsesThePublishedConfigWithItsSideFiles) {
  MuseSparkConfig c =
      parse_musespark_config(read_config_files(test::config_fixture_dir("musespark")));
  EXPECT_EQ(c.num_layers, 62);
  EXPECT_EQ(c.hidden_size, 8192);
  EXPECT_EQ(c.moe_hidden_size, 4096);
  EXPECT_EQ(c.moe_intermediate_size, 4096);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_token, 8);
  EXPECT_EQ(c.q_dim(), 8192);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.gqa_group(), 8);
  EXPECT_EQ(c.vocab_size, 202048);
  EXPECT_EQ(c.vocab_used, 201818);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 0.6841258107984375);
  EXPECT_EQ(c.num_full_attention_layers(), 16);
  EXPECT_EQ(c.num_sliding_layers(), 46);
  EXPECT_TRUE(c.is_full_attention(1));
  EXPECT_TRUE(c.is_full_attention(61));
  EXPECT_TRUE(c.uses_rope(60));
  EXPECT_DOUBLE_EQ(c.layer_rope_theta[0], 500000.0);
  EXPECT_DOUBLE_EQ(c.layer_rope_theta[5], 0.0);
  // EOS from generation_config.json: <|end_of_text|> and <|eot|>, not text_config's single id.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{200001, 200008}));
  // NVFP4 declared by hf_quant_config.json (ModelOpt); vendor layout of expert formats.
  EXPECT_EQ(c.quantization.method, QuantMethod::kModelOpt);
  EXPECT_EQ(c.quantization.format, WeightFormat::kNVFP4);
  EXPECT_EQ(c.quantization.group_size, 16);
  EXPECT_EQ(c.expert_formats.front(), WeightFormat::kBF16);
  EXPECT_EQ(c.expert_formats[1], WeightFormat::kNVFP4);
  EXPECT_EQ(c.expert_formats[60], WeightFormat::kNVFP4);
  EXPECT_EQ(c.expert_formats.back(), WeightFormat::kBF16);
}

TEST(MuseSparkConfig, WithoutSideFilesExpertsAreBf16AndEosComesFromTextConfig) {
  MuseSparkConfig c = parse(test::config_fixture("musespark"));
  EXPECT_FALSE(c.quantization.quantized());
  EXPECT_EQ(c.expert_formats[30], WeightFormat::kBF16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{200001}));
}

TEST(MuseSparkConfig, ParsesTheScaledDownConfig) {
  MuseSparkConfig c = parse(test::config_fixture("musespark-tiny"));
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.vocab_used, 1000);
  EXPECT_TRUE(c.is_full_attention(1));
  EXPECT_TRUE(c.is_full_attention(5));
  EXPECT_FALSE(c.is_full_attention(4));
  EXPECT_EQ(c.quantization.method, QuantMethod::kModelOpt);
  std::vector<WeightFormat> formats = {WeightFormat::kBF16,  WeightFormat::kNVFP4,
                                       WeightFormat::kNVFP4, WeightFormat::kNVFP4,
                                       WeightFormat::kNVFP4, WeightFormat::kBF16};
  EXPECT_EQ(c.expert_formats, formats);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 2}));
}

TEST(MuseSparkConfig, AcceptsCompressedTensorsNvfp4) {
  nlohmann::json config = test::config_fixture("musespark-tiny");
  config["quantization_config"] = nlohmann::json::parse(R"({
    "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
    "quantization_status": "compressed",
    "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
                  "symmetric": true, "dynamic": false},
      "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                            "group_size": 16, "symmetric": true, "dynamic": "local"}}},
    "ignore": ["lm_head"]})");
  MuseSparkConfig c = parse(config);
  EXPECT_EQ(c.quantization.method, QuantMethod::kCompressedTensors);
  EXPECT_EQ(c.quantization.format, WeightFormat::kNVFP4);
  EXPECT_EQ(c.quantization.ignore, (std::vector<std::string>{"lm_head"}));
}

TEST(MuseSparkConfig, RefusesWhatTheSpecRefuses) {
  const std::string t = "/text_config/";
  const std::string q = "/quantization_config/";
  std::vector<Refusal> refusals = {
      {t + "attention_bias", true, {"text_config.attention_bias = true", "muse_spark needs false"}},
      {t + "hidden_act", "gelu", {"text_config.hidden_act = \"gelu\"", "needs \"silu\""}},
      {t + "num_shared_experts", 1, {"text_config.num_shared_experts = 1", "needs 0"}},
      {t + "routed_scaling_factor", 2.0, {"text_config.routed_scaling_factor = 2.0"}},
      {t + "tie_word_embeddings", true, {"text_config.tie_word_embeddings = true"}},
      {t + "rope_parameters/rope_type",
       "llama3",
       {"text_config.rope_parameters.rope_type = \"llama3\"", "needs \"default\""}},
      {t + "mlp_layer_types/3",
       "dense",
       {"text_config.mlp_layer_types[3] = \"dense\"", "needs \"sparse\""}},
      {t + "layer_types/1",
       "sliding_attention",
       {"text_config.layer_types[1] = \"sliding_attention\"", "needs \"full_attention\""}},
      {t + "layer_types/2", "full_attention", {"text_config.layer_types[2] = \"full_attention\""}},
      {t + "layer_types", {"sliding_attention"}, {"has 1 entries but num_hidden_layers is 6"}},
      {t + "layer_rope_theta/1",
       500000.0,
       {"text_config.layer_rope_theta[1] = 500000.0", "needs 0", "no RoPE"}},
      {t + "layer_rope_theta/0",
       10000.0,
       {"text_config.layer_rope_theta[0] = 10000.0", "needs 500000"}},
      {t + "head_dim", 32, {"text_config.head_dim = 32", "must equal hidden_size 512"}},
      {t + "num_key_value_heads",
       3,
       {"text_config.num_key_value_heads = 3", "must divide num_attention_heads = 8"}},
      {t + "vocab_used", 2000, {"text_config.vocab_used = 2000", "vocab_size 1024"}},
      {t + "num_experts_per_tok", 17, {"text_config.num_experts_per_tok = 17", "exceeds"}},
      {t + "num_experts_per_tok",
       40,
       {"text_config.num_experts_per_tok = 40", "above the 32 experts per token"}},
      {t + "moe_intermediate_size",
       100,
       {"text_config.moe_intermediate_size = 100", "multiple of the NVFP4 block size 16"}},
      {t + "post_norm_eps", nullptr, {"text_config.post_norm_eps: missing"}},
      {t + "sliding_window", -1, {"text_config.sliding_window = -1: must be positive"}},
      {t + "qk_scale_factor",
       "5.47",
       {"text_config.qk_scale_factor = \"5.47\": wrong type: expected number, got string"}},
      {q + "quant_algo", "FP8", {"quantization_config.quant_algo = \"FP8\"", "needs \"NVFP4\""}},
      {q + "group_size", 32, {"quantization_config.group_size = 32", "needs 16"}},
      {q + "kv_cache_quant_algo",
       "FP8",
       {"quantization_config.kv_cache_quant_algo = \"FP8\"", "unquantized bf16 KV cache"}},
      {q + "quant_method", "awq", {"quantization_config.quant_method = \"awq\"", "NVFP4"}},
      {t + "eos_token_id", {1, 5000}, {"text_config.eos_token_id[1] = 5000"}},
  };
  expect_refusals(test::config_fixture("musespark-tiny"), refusals, parse_musespark_config);
}

TEST(MuseSparkConfig, RefusesAModelOptKvCacheQuantizationInHfQuantConfig) {
  ConfigFiles files = read_config_files(test::config_fixture_dir("musespark"));
  files.quant["quantization"]["kv_cache_quant_algo"] = "FP8";
  std::string message = test::error_of([&] { parse_musespark_config(files); });
  EXPECT_TRUE(
      message.ends_with("hf_quant_config.json: quantization.kv_cache_quant_algo = "
                        "\"FP8\": unsupported (muse_spark keeps an unquantized bf16 KV "
                        "cache)"))
      << message;
}

}  // namespace
}  // namespace md
