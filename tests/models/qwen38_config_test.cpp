#include "models/qwen38/qwen38_config.h"

#include <gtest/gtest.h>

#include "config_test_util.h"

namespace md {
namespace {

using test::Refusal;

Qwen38Config parse(const nlohmann::json& config) {
  return parse_qwen38_config(config_files_from_json(config));
}

TEST(Qwen38Config, ParsesThePublished27BConfig) {
  Qwen38Config c = parse(test::config_fixture("qwen38-27b"));
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_EQ(c.num_layers, 64);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  // §1.2 derived quantities.
  EXPECT_EQ(c.key_dim(), 2048);
  EXPECT_EQ(c.value_dim(), 6144);
  EXPECT_EQ(c.conv_dim(), 10240);
  EXPECT_EQ(c.q_proj_dim(), 12288);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.attn_output_dim(), 6144);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.gqa_group(), 6);
  EXPECT_EQ(c.linear_head_group(), 3);
  EXPECT_EQ(c.num_full_attention_layers(), 16);
  EXPECT_EQ(c.num_linear_attention_layers(), 48);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(c.is_full_attention(i), i % 4 == 3) << i;
  EXPECT_EQ(c.linear_attention_ordinal(0), 0);
  EXPECT_EQ(c.linear_attention_ordinal(4), 3);
  EXPECT_EQ(c.linear_attention_ordinal(62), 47);
  EXPECT_EQ(c.full_attention_ordinal(3), 0);
  EXPECT_EQ(c.full_attention_ordinal(63), 15);
  EXPECT_THROW(c.full_attention_ordinal(4), Error);
  // <|endoftext|> from text_config, <|im_end|> from the top level.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{248044, 248046}));
}

TEST(Qwen38Config, ParsesTheScaledDownConfigFromItsDirectory) {
  Qwen38Config c = parse_qwen38_config(read_config_files(test::config_fixture_dir("qwen38-tiny")));
  EXPECT_EQ(c.num_layers, 8);
  EXPECT_EQ(c.conv_dim(), 224);
  EXPECT_EQ(c.value_dim(), 96);
  EXPECT_EQ(c.q_proj_dim(), 512);
  EXPECT_EQ(c.kv_dim(), 128);
  EXPECT_EQ(c.attn_output_dim(), 256);
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_EQ(c.linear_head_group(), 3);
  EXPECT_TRUE(c.is_full_attention(3));
  EXPECT_TRUE(c.is_full_attention(7));
  EXPECT_FALSE(c.is_full_attention(6));
  // generation_config.json first, then text_config.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{511, 510}));
}

TEST(Qwen38Config, AcceptsBareTextConfigAndDerivedLayerTypes) {
  nlohmann::json text = test::config_fixture("qwen38-27b")["text_config"];
  text.erase("layer_types");
  text.erase("output_gate_type");
  text.erase("attn_output_gate");
  text["rope_parameters"].erase("partial_rotary_factor");
  text["rope_parameters"].erase("mrope_interleaved");
  Qwen38Config c = parse(text);
  EXPECT_TRUE(c.is_full_attention(63));
  EXPECT_EQ(c.rotary_dim(), 64);  // text_config-level factor
  text.erase("partial_rotary_factor");
  EXPECT_DOUBLE_EQ(parse(text).partial_rotary_factor, 0.25);  // HF default
  EXPECT_EQ(parse(text).eos_token_ids, (std::vector<int64_t>{248044}));
}

TEST(Qwen38Config, RefusesWhatTheSpecRefuses) {
  const std::string t = "/text_config/";
  std::vector<Refusal> refusals = {
      {t + "attention_bias", true, {"text_config.attention_bias = true", "qwen3_5 needs false"}},
      {t + "attn_output_gate", false, {"text_config.attn_output_gate = false", "needs true"}},
      {t + "hidden_act",
       "gelu",
       {"config.json: text_config.hidden_act = \"gelu\": unsupported (qwen3_5 needs \"silu\")"}},
      {t + "linear_conv_kernel_dim", 3, {"text_config.linear_conv_kernel_dim = 3", "needs 4"}},
      {t + "mamba_ssm_dtype",
       "bfloat16",
       {"text_config.mamba_ssm_dtype = \"bfloat16\"", "needs \"float32\""}},
      {t + "output_gate_type",
       "sigmoid",
       {"text_config.output_gate_type = \"sigmoid\"", "needs \"swish\""}},
      {t + "tie_word_embeddings", true, {"text_config.tie_word_embeddings = true"}},
      {"/tie_word_embeddings", true, {"config.json: tie_word_embeddings = true"}},
      {t + "rope_parameters/rope_type",
       "yarn",
       {"text_config.rope_parameters.rope_type = \"yarn\"", "needs \"default\""}},
      {t + "rope_parameters/mrope_interleaved",
       false,
       {"text_config.rope_parameters.mrope_interleaved = false"}},
      {t + "layer_types/2",
       "full_attention",
       {"text_config.layer_types[2] = \"full_attention\"", "needs \"linear_attention\""}},
      {t + "layer_types/3",
       "linear_attention",
       {"text_config.layer_types[3]", "\"full_attention\""}},
      {t + "layer_types",
       nlohmann::json::array({"linear_attention"}),
       {"text_config.layer_types", "has 1 entries but num_hidden_layers is 64"}},
      {"/model_type", "qwen3_next", {"config.json: model_type = \"qwen3_next\"", "\"qwen3_5\""}},
      {t + "model_type", "qwen3", {"text_config.model_type = \"qwen3\"", "\"qwen3_5_text\""}},
      {t + "num_key_value_heads",
       5,
       {"text_config.num_key_value_heads = 5", "must divide num_attention_heads = 24"}},
      {t + "linear_num_key_heads",
       20,
       {"text_config.linear_num_key_heads = 20", "must divide linear_num_value_heads = 48"}},
      {t + "rope_parameters/partial_rotary_factor",
       0.3,
       {"text_config.rope_parameters.partial_rotary_factor = 0.3", "even integer"}},
      {t + "rope_parameters/partial_rotary_factor",
       1.5,
       {"partial_rotary_factor = 1.5", "in (0, head_dim]"}},
      {t + "rope_parameters/mrope_section",
       {11, 11, 11},
       {"text_config.rope_parameters.mrope_section = [11,11,11]", "rotary_dim / 2 = 32"}},
      {t + "quantization_config",
       {{"quant_method", "fp8"}},
       {"text_config.quantization_config = {\"quant_method\":\"fp8\"}", "weights are bf16 only"}},
      {"/quantization_config", {{"quant_method", "gptq"}}, {"config.json: quantization_config"}},
      {t + "hidden_size", 0, {"text_config.hidden_size = 0: must be positive"}},
      {t + "hidden_size",
       "5120",
       {"text_config.hidden_size = \"5120\": wrong type: expected integer, got string"}},
      {t + "head_dim", nullptr, {"text_config.head_dim: missing (required by qwen3_5)"}},
      {t + "eos_token_id", 300000, {"text_config.eos_token_id = 300000", "outside the vocabulary"}},
      {"/text_config", nullptr, {"text_config: missing"}},
  };
  expect_refusals(test::config_fixture("qwen38-27b"), refusals, parse_qwen38_config);
}

TEST(Qwen38Config, RefusesOtherLayerIntervalsWhenLayerTypesAreAbsent) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  config["text_config"].erase("layer_types");
  config["text_config"]["full_attention_interval"] = 2;
  EXPECT_EQ(test::error_of([&] { parse(config); }),
            "config.json: text_config.full_attention_interval = 2: unsupported (qwen3_5 needs 4)");
}

}  // namespace
}  // namespace md
