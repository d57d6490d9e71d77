// The scaled-down Kimi K3 checkpoints (tools/make_kimi_fixtures.py, §15, the real tensor names and
// dtypes of §3) against what megadecode derives from their config alone: every tensor the
// config implies is present with its shape and dtype, and the footprint `info` reports counts
// the checkpoint's bytes exactly (the one difference being A_log's padding, §14: only the first
// num_heads entries are weights).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "kimi_test_util.h"
#include "models/kimi/kimi_config.h"

namespace md {
namespace {

struct Checkpoint {
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::map<std::string, const TensorView*> tensors;
};

Checkpoint open(const std::string& dir) {
  Checkpoint c;
  for (const char* shard :
       {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    c.shards.push_back(std::make_unique<SafetensorsFile>(dir + "/" + shard));
    for (const TensorView& t : c.shards.back()->tensors()) c.tensors[std::string(t.name)] = &t;
  }
  return c;
}

void expect_tensor(const Checkpoint& c, const std::string& name, DType dtype,
                   std::vector<int64_t> shape) {
  auto it = c.tensors.find(name);
  ASSERT_NE(it, c.tensors.end()) << name;
  EXPECT_EQ(it->second->dtype, dtype) << name;
  EXPECT_EQ(std::vector<int64_t>(it->second->shape.begin(), it->second->shape.end()), shape)
      << name;
}

class KimiFixture : public testing::TestWithParam<std::string> {};

TEST_P(KimiFixture, HoldsEveryTensorItsConfigImplies) {
  const std::string dir = test::kimi_fixture_path(GetParam());
  const KimiK3Config k = parse_kimi_k3_config(read_config_files(dir));
  const Checkpoint c = open(dir);
  const int64_t h = k.hidden_size, ch = k.kda_channels(), d = k.kda_head_dim;
  const std::string m = "language_model.model.";
  expect_tensor(c, m + "embed_tokens.weight", DType::kBF16, {k.vocab_size, h});
  expect_tensor(c, "language_model.lm_head.weight", DType::kBF16, {k.vocab_size, h});
  expect_tensor(c, m + "output_attn_res_proj.weight", DType::kBF16, {1, h});
  int64_t expected = 5;
  for (int64_t l = 0; l < k.num_layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    expect_tensor(c, p + "self_attention_res_proj.weight", DType::kBF16, {1, h});
    expected += 6 + 2;  // norms and residual projections; g_proj and o_proj
    if (k.layer_kind(l) == KimiLayerKind::kKda) {
      expect_tensor(c, p + "self_attn.q_conv1d.weight", DType::kF32, {ch, 1, k.short_conv_kernel});
      expect_tensor(c, p + "self_attn.dt_bias", DType::kF32, {ch});
      expect_tensor(c, p + "self_attn.o_norm.weight", DType::kF32, {d});
      expect_tensor(c, p + "self_attn.f_b_proj.weight", DType::kBF16, {ch, d});
      expect_tensor(c, p + "self_attn.b_proj.weight", DType::kBF16, {k.kda_num_heads, h});
      EXPECT_GE(c.tensors.at(p + "self_attn.A_log")->shape[0], k.kda_num_heads);
      expected += 12;
    } else {
      expect_tensor(c, p + "self_attn.kv_b_proj.weight", DType::kBF16,
                    {k.num_attention_heads * (k.qk_nope_head_dim + k.v_head_dim), k.kv_lora_rank});
      expect_tensor(c, p + "self_attn.kv_a_proj_with_mqa.weight", DType::kBF16,
                    {k.kv_lora_rank + k.qk_rope_head_dim, h});
      expected += 6;
    }
    if (!k.is_moe_layer(l)) {
      expect_tensor(c, p + "mlp.down_proj.weight", DType::kBF16, {h, k.intermediate_size});
      expected += 3;
      continue;
    }
    const std::string e = p + "block_sparse_moe.";
    expect_tensor(c, e + "gate.e_score_correction_bias", DType::kF32, {k.num_experts});
    const int64_t lat = k.routed_expert_hidden_size, i = k.moe_intermediate_size;
    for (int64_t x = 0; x < k.num_experts; ++x) {
      const std::string ex = e + "experts." + std::to_string(x) + ".";
      expect_tensor(c, ex + "w1.weight_packed", DType::kU8, {i, lat / 2});
      expect_tensor(c, ex + "w3.weight_scale", DType::kU8, {i, lat / 32});
      expect_tensor(c, ex + "w2.weight_packed", DType::kU8, {lat, i / 2});
      expect_tensor(c, ex + "w2.weight_scale", DType::kU8, {lat, i / 32});
    }
    expected += 8 + 6 * k.num_experts;
  }
  EXPECT_EQ(static_cast<int64_t>(c.tensors.size()), expected);
}

TEST_P(KimiFixture, TheFootprintCountsTheCheckpointsBytes) {
  const std::string dir = test::kimi_fixture_path(GetParam());
  const KimiK3Config k = parse_kimi_k3_config(read_config_files(dir));
  const Checkpoint c = open(dir);
  int64_t bytes = 0, a_log_padding = 0;
  for (const auto& [name, view] : c.tensors) {
    bytes += static_cast<int64_t>(view->nbytes);
    if (name.ends_with(".A_log")) a_log_padding += (view->shape[0] - k.kda_num_heads) * 4;
  }
  EXPECT_EQ(kimi_k3_footprint(k, {}).total_weight_bytes(), bytes - a_log_padding);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiFixture, testing::Values("kimi-k3-tiny", "kimi-k3-small"),
                         test::kimi_param_name);

}  // namespace
}  // namespace md
