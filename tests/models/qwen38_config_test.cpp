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
      {t + "hidden_act",
       "prelu",
       {"config.json: text_config.hidden_act = \"prelu\": unsupported", "not prelu or xielu"}},
      {t + "linear_conv_kernel_dim", 0, {"text_config.linear_conv_kernel_dim = 0", "positive"}},
      {"/tie_word_embeddings",
       true,
       {"config.json: tie_word_embeddings = true", "but text_config.tie_word_embeddings is false"}},
      {t + "rope_parameters/rope_type",
       "yarn",
       {"text_config.rope_parameters.rope_type = \"yarn\"", "needs \"default\""}},
      {t + "rope_parameters/mrope_interleaved",
       false,
       {"text_config.rope_parameters.mrope_interleaved = false"}},
      {t + "layer_types/2",
       "sliding_attention",
       {"text_config.layer_types[2] = \"sliding_attention\"",
        "qwen3_5 layers are \"linear_attention\" or \"full_attention\""}},
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

// Which layers are attention layers, as a string: 'F' full attention, 'L' Gated DeltaNet.
std::string pattern_of(const Qwen38Config& c) {
  std::string pattern;
  for (int64_t i = 0; i < c.num_layers; ++i) pattern += c.is_full_attention(i) ? 'F' : 'L';
  return pattern;
}

TEST(Qwen38Config, DerivesTheLayerPatternFromAnyInterval) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  config["text_config"].erase("layer_types");
  config["text_config"]["num_hidden_layers"] = 6;
  const std::vector<std::pair<int, std::string>> expected = {
      {1, "FFFFFF"}, {2, "LFLFLF"}, {3, "LLFLLF"}, {4, "LLLFLL"}, {7, "LLLLLL"}};
  for (const auto& [interval, pattern] : expected) {
    config["text_config"]["full_attention_interval"] = interval;
    EXPECT_EQ(pattern_of(parse(config)), pattern) << "interval " << interval;
  }
  config["text_config"].erase("full_attention_interval");
  EXPECT_EQ(pattern_of(parse(config)), "LLLFLL");  // transformers' default interval, 4
  config["text_config"]["full_attention_interval"] = 0;
  EXPECT_NE(test::error_of([&] {
              parse(config);
            }).find("text_config.full_attention_interval = 0: must be positive"),
            std::string::npos);
}

TEST(Qwen38Config, TakesAnyExplicitLayerPatternAndNumbersEachKindsLayers) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  config["text_config"]["num_hidden_layers"] = 6;
  config["text_config"]["full_attention_interval"] = 2;  // ignored: layer_types wins
  config["text_config"]["layer_types"] = {"full_attention", "linear_attention", "full_attention",
                                          "full_attention", "linear_attention", "linear_attention"};
  Qwen38Config c = parse(config);
  EXPECT_EQ(pattern_of(c), "FLFFLL");
  EXPECT_EQ(c.num_full_attention_layers(), 3);
  EXPECT_EQ(c.num_linear_attention_layers(), 3);
  const std::vector<int64_t> ordinals = {0, 0, 1, 2, 1, 2};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c.is_full_attention(i) ? c.full_attention_ordinal(i) : c.linear_attention_ordinal(i),
              ordinals[static_cast<std::size_t>(i)])
        << "layer " << i;
  }
  EXPECT_THROW(c.linear_attention_ordinal(0), Error);
  EXPECT_THROW(c.full_attention_ordinal(1), Error);
}

TEST(Qwen38Config, TiesTheEmbeddingsWhereEitherLevelSaysSoAndNeitherDisagrees) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  EXPECT_FALSE(parse(config).tie_word_embeddings);
  config["tie_word_embeddings"] = true;
  config["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse(config).tie_word_embeddings);
  config["text_config"].erase("tie_word_embeddings");
  EXPECT_TRUE(parse(config).tie_word_embeddings);  // the top level alone
  config.erase("tie_word_embeddings");
  config["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse(config).tie_word_embeddings);                 // text_config alone
  EXPECT_TRUE(parse(config["text_config"]).tie_word_embeddings);  // a bare text config
}

// transformers' qwen3_5 never reads attn_output_gate, output_gate_type or mamba_ssm_dtype (its
// attention is always gated, its state f32): a config that sets them otherwise is the same model
// to it, and to megadecode.
TEST(Qwen38Config, IgnoresTheKeysTransformersDoesNotRead) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  const Qwen38Config plain = parse(config);
  config["text_config"]["attn_output_gate"] = false;
  config["text_config"]["output_gate_type"] = "sigmoid";
  config["text_config"]["mamba_ssm_dtype"] = "bfloat16";
  const Qwen38Config other = parse(config);
  EXPECT_EQ(other.q_proj_dim(), plain.q_proj_dim());  // still a query and a gate per head
  EXPECT_EQ(other.layer_types, plain.layer_types);
}

TEST(Qwen38Config, ReadsAttentionBias) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  EXPECT_FALSE(parse(config).attention_bias);
  config["text_config"]["attention_bias"] = true;
  EXPECT_TRUE(parse(config).attention_bias);
}

TEST(Qwen38Config, TakesTheHiddenActivationsTransformersNames) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  EXPECT_EQ(parse(config).hidden_act, kernels::Activation::kSilu);
  config["text_config"]["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_EQ(parse(config).hidden_act, kernels::Activation::kGeluTanh);
  config["text_config"]["hidden_act"] = "gelu";
  EXPECT_EQ(parse(config).hidden_act, kernels::Activation::kGeluErf);
  config["text_config"].erase("hidden_act");
  EXPECT_EQ(parse(config).hidden_act, kernels::Activation::kSilu);  // transformers' default
}

TEST(Qwen38Config, TakesAnyConvKernelSize) {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  for (int kernel : {1, 2, 3, 5}) {
    config["text_config"]["linear_conv_kernel_dim"] = kernel;
    EXPECT_EQ(parse(config).linear_conv_kernel, kernel);
  }
}

// qwen3_5_moe: the 27B's text model with the 35B-A3B's sparse block in place of the MLP.
nlohmann::json moe_config() {
  nlohmann::json config = test::config_fixture("qwen38-27b");
  config["model_type"] = "qwen3_5_moe";
  config["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
  nlohmann::json& text = config["text_config"];
  text["model_type"] = "qwen3_5_moe_text";
  text.erase("intermediate_size");
  text["num_experts"] = 256;
  text["num_experts_per_tok"] = 8;
  text["moe_intermediate_size"] = 512;
  text["shared_expert_intermediate_size"] = 512;
  return config;
}

TEST(Qwen38Config, ReadsTheMoeBlockOfQwen35Moe) {
  const Qwen38Config c = parse(moe_config());
  ASSERT_TRUE(c.is_moe());
  EXPECT_EQ(c.moe.experts, 256);
  EXPECT_EQ(c.moe.experts_per_token, 8);
  EXPECT_EQ(c.moe.intermediate, 512);
  EXPECT_EQ(c.moe.shared_intermediate, 512);
  EXPECT_STREQ(c.text_model_type(), "qwen3_5_moe_text");
  EXPECT_TRUE(parse(moe_config()["text_config"]).is_moe());  // the bare text config
  EXPECT_FALSE(parse(test::config_fixture("qwen38-27b")).is_moe());

  // A token reads 8 of 256 experts: the footprint's active parameters say so.
  const ConfigFootprint f = qwen38_footprint(c, {});
  const int64_t expert = 3 * 512 * c.hidden_size;
  EXPECT_EQ(f.params_of(WeightKind::kRoutedExperts), c.num_layers * 256 * expert);
  EXPECT_LT(f.active_params(), f.total_params());
  // Inactive: the unchosen experts and every embedding row but the token's.
  EXPECT_EQ(f.total_params() - f.active_params(),
            c.num_layers * (256 - 8) * expert + (c.vocab_size - 1) * c.hidden_size);
}

TEST(Qwen38Config, RefusesMoeSettingsTransformersCannotRun) {
  const std::string t = "/text_config/";
  std::vector<Refusal> refusals = {
      {t + "num_experts_per_tok", 257, {"text_config.num_experts_per_tok = 257", "exceeds"}},
      {t + "num_experts_per_tok", 0, {"text_config.num_experts_per_tok = 0", "positive"}},
      {t + "moe_intermediate_size", -1, {"text_config.moe_intermediate_size = -1"}},
      {t + "model_type",
       "qwen3_5_text",
       {"text_config.model_type = \"qwen3_5_text\"", "qwen3_5_moe_text"}},
  };
  for (const char* key : {"num_experts", "moe_intermediate_size", "shared_expert_intermediate_size",
                          "num_experts_per_tok"}) {
    refusals.push_back({t + key, nullptr, {key}, true});
  }
  test::expect_refusals(moe_config(), refusals, parse_qwen38_config);
}

}  // namespace
}  // namespace md
