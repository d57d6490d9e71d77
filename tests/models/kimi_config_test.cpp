#include "models/kimi/kimi_config.h"

#include <gtest/gtest.h>

#include "config_test_util.h"

namespace md {
namespace {

using test::Refusal;

KimiK3Config parse(const nlohmann::json& config) {
  return parse_kimi_k3_config(config_files_from_json(config));
}

TEST(KimiK3Config, ParsesThePublishedConfig) {
  KimiK3Config c = parse(test::config_fixture("kimi-k3"));
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_layers, 93);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.attn_res_block_size, 12);
  EXPECT_EQ(c.num_residual_blocks(), 8);
  EXPECT_EQ(c.num_kda_layers(), 69);
  EXPECT_EQ(c.num_mla_layers(), 24);
  EXPECT_EQ(c.kda_channels(), 12288);
  EXPECT_EQ(c.mla_qk_head_dim(), 192);
  EXPECT_EQ(c.mla_latent_cache_width(), 576);
  EXPECT_EQ(c.shared_intermediate_size(), 6144);
  EXPECT_EQ(c.num_experts, 896);
  EXPECT_EQ(c.num_experts_per_token, 16);
  EXPECT_DOUBLE_EQ(c.gate_lower_bound, -5.0);
  EXPECT_DOUBLE_EQ(c.situ_beta, 4.0);
  EXPECT_DOUBLE_EQ(c.situ_linear_beta, 25.0);
  // §4: MLA at 3, 7, ..., 91 and 92; KDA elsewhere; slots by rank.
  for (int64_t i = 0; i < 93; ++i) {
    bool mla = (i % 4 == 3 && i <= 91) || i == 92;
    EXPECT_EQ(c.layer_kind(i), mla ? KimiLayerKind::kMla : KimiLayerKind::kKda) << i;
    if (mla) {
      EXPECT_EQ(c.mla_slot(i), i / 4) << i;
    } else {
      EXPECT_EQ(c.kda_slot(i), i - i / 4) << i;
    }
  }
  EXPECT_EQ(c.mla_slot(92), 23);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.quantization.method, QuantMethod::kCompressedTensors);
  EXPECT_EQ(c.quantization.format, WeightFormat::kMXFP4);
  EXPECT_EQ(c.quantization.group_size, 32);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{163586}));
}

TEST(KimiK3Config, ParsesTheScaledDownConfig) {
  KimiK3Config c = parse(test::config_fixture("kimi-k3-tiny"));
  EXPECT_EQ(c.num_layers, 10);
  EXPECT_EQ(c.num_residual_blocks(), 3);
  EXPECT_EQ(c.layer_kind(9), KimiLayerKind::kMla);  // the "extra last layer"
  EXPECT_EQ(c.mla_slot(9), 2);
  EXPECT_EQ(c.kda_slot(8), 6);
  EXPECT_EQ(c.mla_latent_cache_width(), 48);
  EXPECT_EQ(c.num_experts_per_token, 4);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{501}));
}

TEST(KimiK3Config, ReadsATopLevelConfigWithoutTextConfig) {
  nlohmann::json config = test::config_fixture("kimi-k3");
  nlohmann::json text = config["text_config"];
  text["quantization_config"] = config["quantization_config"];
  text["eos_token_id"] = 163586;
  EXPECT_EQ(parse(text).num_layers, 93);
}

TEST(KimiK3Config, RefusesWhatTheSpecRefuses) {
  const std::string t = "/text_config/";
  const std::string la = t + "linear_attn_config/";
  const std::string q = "/quantization_config/";
  std::vector<Refusal> refusals = {
      {t + "mla_use_nope", false, {"text_config.mla_use_nope = false", "kimi_k3 needs true"}},
      {t + "mla_use_output_gate",
       nullptr,
       {"text_config.mla_use_output_gate: missing (kimi_k3 needs true)"}},
      {t + "latent_moe_use_norm", false, {"text_config.latent_moe_use_norm = false"}},
      {t + "moe_renormalize", false, {"text_config.moe_renormalize = false"}},
      {la + "use_full_rank_gate",
       false,
       {"text_config.linear_attn_config.use_full_rank_gate = false"}},
      {t + "moe_router_activation_func",
       "softmax",
       {"text_config.moe_router_activation_func = \"softmax\"", "needs \"sigmoid\""}},
      {t + "hidden_act", "silu", {"text_config.hidden_act = \"silu\"", "needs \"situ\""}},
      {t + "first_k_dense_replace", 3, {"text_config.first_k_dense_replace = 3", "needs 1"}},
      {t + "moe_layer_freq", 2, {"text_config.moe_layer_freq = 2"}},
      {t + "num_expert_group", 8, {"text_config.num_expert_group = 8"}},
      {t + "routed_scaling_factor", 2.5, {"text_config.routed_scaling_factor = 2.5", "needs 1.0"}},
      {t + "tie_word_embeddings", true, {"text_config.tie_word_embeddings = true"}},
      {la + "kda_layers/0",
       4,
       {"text_config.linear_attn_config.full_attn_layers[0] = 4", "listed twice"}},
      {la + "kda_layers/1",
       94,
       {"text_config.linear_attn_config.kda_layers[1] = 94", "outside 1..93"}},
      {la + "kda_layers/0", 0, {"kda_layers[0] = 0", "1-based"}},
      {la + "full_attn_layers",
       {4, 8},
       {"text_config.linear_attn_config.kda_layers", "layer 12 (1-based) is in neither"}},
      {la + "num_heads",
       64,
       {"text_config.linear_attn_config.num_heads = 64", "num_attention_heads = 96"}},
      {la + "head_dim", 64, {"text_config.linear_attn_config.head_dim = 64", "qk_nope_head_dim"}},
      {t + "v_head_dim", 96, {"text_config.linear_attn_config.head_dim = 128", "v_head_dim = 96"}},
      {t + "routed_expert_hidden_size",
       3600,
       {"text_config.routed_expert_hidden_size = 3600", "multiple of the MXFP4 group size 32"}},
      {t + "moe_intermediate_size", 3080, {"text_config.moe_intermediate_size = 3080"}},
      {t + "attn_res_block_size", 0, {"text_config.attn_res_block_size = 0: must be positive"}},
      {t + "num_experts_per_token",
       1000,
       {"text_config.num_experts_per_token = 1000", "exceeds num_experts = 896"}},
      {t + "num_key_value_heads", 8, {"text_config.num_key_value_heads = 8", "needs 96"}},
      {la + "gate_lower_bound", 1.0, {"gate_lower_bound = 1.0", "must be negative"}},
      {"/quantization_config",
       nullptr,
       {"text_config.quantization_config: missing", "mxfp4-pack-quantized"}},
      {q + "format",
       "nvfp4-pack-quantized",
       {"config.json: quantization_config.format = \"nvfp4-pack-quantized\"",
        "needs \"mxfp4-pack-quantized\""}},
      {q + "quant_method", "gptq", {"quantization_config.quant_method = \"gptq\""}},
      {q + "config_groups/group_0/weights/group_size",
       16,
       {"quantization_config.config_groups.group_0.weights.group_size = 16", "needs 32"}},
      {q + "config_groups/group_0/weights/num_bits",
       8,
       {"quantization_config.config_groups.group_0.weights.num_bits = 8", "needs 4"}},
      {q + "config_groups/group_0/weights/type",
       "int",
       {"weights.type = \"int\"", "needs \"float\""}},
      {q + "config_groups/group_0/weights/strategy",
       "tensor_group",
       {"weights.strategy = \"tensor_group\"", "needs \"group\""}},
      {q + "config_groups/group_0/weights/scale_dtype",
       "torch.float8_e4m3fn",
       {"weights.scale_dtype = \"torch.float8_e4m3fn\""}},
      {q + "config_groups/group_0/input_activations",
       {{"num_bits", 8}},
       {"quantization_config.config_groups.group_0.input_activations", "weight-only"}},
      {q + "kv_cache_scheme", {{"num_bits", 8}}, {"quantization_config.kv_cache_scheme"}},
      {q + "config_groups",
       nlohmann::json::object(),
       {"config_groups = {}: no quantization group"}},
      {"/text_config/eos_token_id", 163840, {"outside the vocabulary [0, 163840)"}},
  };
  expect_refusals(test::config_fixture("kimi-k3"), refusals, parse_kimi_k3_config);
}

}  // namespace
}  // namespace md
