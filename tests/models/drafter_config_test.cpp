#include <gtest/gtest.h>

#include "config_test_util.h"
#include "models/drafters/dflash2_config.h"
#include "models/drafters/dspark_config.h"
#include "models/model_config.h"

namespace md {
namespace {

using test::error_of;
using test::Refusal;

ModelConfig load(const char* fixture) {
  return load_model_config(test::config_fixture_dir(fixture));
}

TEST(DFlash2Config, ParsesThe27BDrafter) {
  DFlash2Config c =
      parse_dflash2_config(config_files_from_json(test::config_fixture("qwen38-dflash2")));
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{5, 19, 33, 47, 61}));
  EXPECT_EQ(c.fc_in_features(), 25600);
  EXPECT_EQ(c.mask_token_id, 248070);
  EXPECT_EQ(c.conv_groups(), 320);
  EXPECT_EQ(c.kernel_projection_rows(), 1280);
  EXPECT_EQ(c.selector_rank, 256);
  EXPECT_EQ(c.selector_top_k, 16);
}

TEST(DFlash2Config, ParsesTheScaledDownDrafter) {
  DFlash2Config c =
      parse_dflash2_config(config_files_from_json(test::config_fixture("dflash2-tiny")));
  EXPECT_EQ(c.conv_groups(), 8);
  EXPECT_EQ(c.kernel_projection_rows(), 32);
  EXPECT_EQ(c.fc_in_features(), 640);
}

TEST(DFlash2Config, RefusesWhatTheSpecRefuses) {
  const std::string d = "/dflash_config/";
  std::vector<Refusal> refusals = {
      {"/is_causal", true, {"config.json: is_causal = true", "DFlash2DraftModel needs false"}},
      {"/model_type", "llama", {"model_type = \"llama\"", "needs \"qwen3\""}},
      {"/hidden_act", "gelu", {"hidden_act = \"gelu\""}},
      {"/layer_types/4",
       "full_attention",
       {"layer_types[4] = \"full_attention\"", "needs \"sliding_attention\""}},
      {"/rope_parameters/rope_type", "yarn", {"rope_parameters.rope_type = \"yarn\""}},
      {"/num_key_value_heads", 6, {"num_key_value_heads = 6", "divide num_attention_heads = 32"}},
      {d + "conv_group_size",
       48,
       {"dflash_config.conv_group_size = 48", "must divide hidden_size 5120"}},
      {d + "target_layer_ids/4", 63, {"dflash_config.target_layer_ids[4] = 63", "[0, 63)"}},
      {d + "target_layer_ids/0", -1, {"dflash_config.target_layer_ids[0] = -1"}},
      {d + "target_layer_ids", nlohmann::json::array(), {"target_layer_ids = []"}},
      {d + "mask_token_id", 248320, {"dflash_config.mask_token_id = 248320", "< vocab_size"}},
      {d + "output_multiplier", 2.0, {"dflash_config.output_multiplier = 2.0", "needs 1.0"}},
      {d + "final_logit_softcapping",
       30.0,
       {"dflash_config.final_logit_softcapping = 30.0", "no logit softcap"}},
      {d + "input_embedding_scale", 0.5, {"dflash_config.input_embedding_scale = 0.5"}},
      {d + "block_size", 1, {"dflash_config.block_size = 1", "at least 2"}},
      {d + "selector_top_k", 0, {"dflash_config.selector_top_k = 0: must be positive"}},
      {"/dflash_config", nullptr, {"dflash_config: missing"}},
  };
  expect_refusals(test::config_fixture("qwen38-dflash2"), refusals, parse_dflash2_config);
}

TEST(DFlash2Config, MustMatchItsTarget) {
  EXPECT_NO_THROW(check_draft_for_target(load("qwen38-27b"), load("qwen38-dflash2")));
  EXPECT_NO_THROW(check_draft_for_target(load("qwen38-tiny"), load("dflash2-tiny")));
  std::string message =
      error_of([] { check_draft_for_target(load("qwen38-tiny"), load("qwen38-dflash2")); });
  EXPECT_TRUE(
      message.ends_with("qwen38-dflash2/config.json: hidden_size = 5120: must equal the "
                        "target's 128 (qwen3_5)"))
      << message;
  EXPECT_EQ(error_of([] { check_draft_for_target(load("kimi-k3"), load("qwen38-dflash2")); }),
            "a dflash2 drafter cannot draft for a kimi_k3 target");
  EXPECT_EQ(error_of([] { check_draft_for_target(load("qwen38-tiny"), load("qwen38-tiny")); }),
            "qwen38 is not a drafter");
}

TEST(DSparkConfig, ParsesTheKimiK3Drafter) {
  DSparkConfig c =
      parse_dspark_config(config_files_from_json(test::config_fixture("kimi-k3-dspark")));
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.q_dim(), 6144);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.gqa_group(), 6);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.aux_hidden_state_layer_ids, (std::vector<int64_t>{24, 48, 72, 88, 92}));
  EXPECT_EQ(c.fc_in_features(), 35840);
  EXPECT_EQ(c.mask_token_id, 163837);
  EXPECT_EQ(c.markov_rank, 256);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_TRUE(c.enable_confidence_head);
}

TEST(DSparkConfig, RefusesWhatTheSpecRefuses) {
  const std::string l = "/transformer_layer_config/";
  std::vector<Refusal> refusals = {
      {"/markov_head_type", "gated", {"markov_head_type = \"gated\"", "dspark needs \"vanilla\""}},
      {"/draft_vocab_size", 200000, {"draft_vocab_size = 200000", "1..vocab_size 163840"}},
      {"/draft_vocab_size", 0, {"draft_vocab_size = 0"}},
      {"/sample_from_anchor", false, {"sample_from_anchor = false", "needs true"}},
      {"/sliding_window_non_causal", true, {"sliding_window_non_causal = true"}},
      {l + "rope_parameters/rope_type",
       "yarn",
       {"transformer_layer_config.rope_parameters.rope_type = \"yarn\"", "needs \"default\""}},
      {l + "layer_types/0",
       "full_attention",
       {"transformer_layer_config.layer_types[0] = \"full_attention\""}},
      {l + "is_causal", false, {"transformer_layer_config.is_causal = false"}},
      {"/fc_norm", true, {"fc_norm = true", "needs false"}},
      {"/aux_hidden_stream", "attn_res", {"aux_hidden_stream = \"attn_res\"", "\"prefix\""}},
      {"/aux_hidden_state_layer_ids/1",
       24,
       {"aux_hidden_state_layer_ids[1] = 24", "must be distinct"}},
      {"/aux_hidden_state_layer_ids/0", 1, {"aux_hidden_state_layer_ids[0] = 1", "start at 2"}},
      {l + "num_key_value_heads",
       7,
       {"transformer_layer_config.num_key_value_heads = 7", "divide num_attention_heads = 96"}},
      {"/mask_token_id", 163840, {"mask_token_id = 163840", "< vocab_size 163840"}},
      {"/speculators_config/algorithm", "eagle3", {"speculators_config.algorithm = \"eagle3\""}},
      {"/transformer_layer_config", nullptr, {"transformer_layer_config: missing"}},
      {"/markov_rank", 0, {"markov_rank = 0: must be positive"}},
  };
  expect_refusals(test::config_fixture("kimi-k3-dspark"), refusals, parse_dspark_config);
}

TEST(DSparkConfig, MustMatchItsTarget) {
  EXPECT_NO_THROW(check_draft_for_target(load("kimi-k3"), load("kimi-k3-dspark")));
  EXPECT_NO_THROW(check_draft_for_target(load("kimi-k3-tiny"), load("dspark-tiny")));
  std::string message =
      error_of([] { check_draft_for_target(load("kimi-k3"), load("dspark-tiny")); });
  EXPECT_NE(message.find("transformer_layer_config.hidden_size = 256: must equal the target's "
                         "7168 (kimi_k3)"),
            std::string::npos)
      << message;
  // Taps must lie below the last target layer.
  ModelConfig target = load("kimi-k3");
  std::get<KimiK3Config>(target).num_layers = 70;
  message = error_of([&] { check_draft_for_target(target, load("kimi-k3-dspark")); });
  EXPECT_NE(message.find("aux_hidden_state_layer_ids[2] = 72"), std::string::npos) << message;
  EXPECT_EQ(error_of([] { check_draft_for_target(load("qwen38-27b"), load("kimi-k3-dspark")); }),
            "a dspark drafter cannot draft for a qwen38 target");
}

}  // namespace
}  // namespace md
