// Kimi K3's weight binding (models/kimi/kimi_weights.h, §3) on the scaled-down checkpoints:
// everything binds with the folded residual weights, the narrowed A_log and MXFP4 experts read in
// place; damaged copies (an E8M0 scale byte 0 or 255, a missing tensor, a transposed shape) are
// refused with the tensor named.
#include "models/kimi/kimi_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/checkpoint_edits.h"
#include "base/dtype.h"
#include "base/error.h"
#include "kernels/mxfp4.h"
#include "kimi_test_util.h"

namespace md {
namespace {

namespace fs = std::filesystem;

std::vector<float> widened(const TensorView& t) {
  std::vector<float> out(t.numel());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, t.data + 2 * i, 2);
      out[i] = bf16_to_f32(bits);
    }
  }
  return out;
}

class KimiWeights : public testing::TestWithParam<std::string> {};

TEST_P(KimiWeights, EveryTensorBindsAsTheSpecSays) {
  const std::string dir = test::kimi_fixture_path(GetParam());
  const KimiK3Config c = parse_kimi_k3_config(read_config_files(dir));
  const Checkpoint checkpoint(dir);
  const KimiK3Weights w = bind_kimi_k3_weights(checkpoint, c);
  ASSERT_EQ(static_cast<int64_t>(w.layers.size()), c.num_layers);
  const std::string last = "language_model.model.layers." + std::to_string(c.num_layers - 1) + ".";
  // wM = mlp_res_norm ⊙ mlp_res_proj[0], exactly.
  const std::vector<float> norm = widened(*checkpoint.find(last + "mlp_res_norm.weight"));
  const std::vector<float> proj = widened(*checkpoint.find(last + "mlp_res_proj.weight"));
  for (int64_t i = 0; i < c.hidden_size; ++i) {
    EXPECT_EQ(w.layers.back().mlp_mix[i], norm[i] * proj[i]) << i;
  }
  // wA of the same layer and wO from their own norms and projections (not each other's).
  auto fold = [&](const std::string& n, const std::string& p) {
    const std::vector<float> a = widened(*checkpoint.find(n)), b = widened(*checkpoint.find(p));
    std::vector<float> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] * b[i];
    return out;
  };
  EXPECT_EQ(w.layers.back().attention_mix,
            fold(last + "self_attention_res_norm.weight", last + "self_attention_res_proj.weight"));
  EXPECT_EQ(w.output_mix, fold("language_model.model.output_attn_res_norm.weight",
                               "language_model.model.output_attn_res_proj.weight"));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const KimiLayerWeights& layer = w.layers[l];
    if (c.layer_kind(l) == KimiLayerKind::kKda) {
      const std::vector<float> a_log = widened(*checkpoint.find(
          "language_model.model.layers." + std::to_string(l) + ".self_attn.A_log"));
      ASSERT_EQ(static_cast<int64_t>(layer.kda.exp_a_log.size()), c.kda_num_heads);
      for (int64_t hd = 0; hd < c.kda_num_heads; ++hd)
        EXPECT_EQ(layer.kda.exp_a_log[hd], std::exp(a_log[hd]));
    }
    if (!c.is_moe_layer(l)) continue;
    ASSERT_EQ(layer.moe.experts.count(), c.num_experts);
    EXPECT_EQ(layer.moe.experts.down[0].format_name(), "MXFP4");
    EXPECT_EQ(layer.moe.experts.down[0].rows, c.routed_expert_hidden_size);
    EXPECT_EQ(layer.moe.experts.gate[0].cols, c.routed_expert_hidden_size);
  }
  // An expert's row dequantises from its checkpoint bytes (low nibble first, E8M0 per 32).
  const std::string e = "language_model.model.layers.1.block_sparse_moe.experts.3.w2.";
  const TensorView* packed = checkpoint.find(e + "weight_packed");
  const TensorView* scales = checkpoint.find(e + "weight_scale");
  const int64_t cols = c.moe_intermediate_size;
  std::vector<float> row(cols), expected(cols);
  ASSERT_TRUE(kernels::row_to_f32(w.layers[1].moe.experts.down[3], 5, row.data()));
  for (int64_t k = 0; k < cols; ++k) {
    const uint8_t byte = packed->data[5 * cols / 2 + k / 2];
    const uint8_t code = k % 2 == 0 ? byte & 0xF : byte >> 4;
    const float magnitude = std::array{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f}[code & 7];
    expected[k] = (code & 8 ? -magnitude : magnitude) *
                  std::ldexp(1.0f, scales->data[5 * (cols / 32) + k / 32] - 127);
  }
  EXPECT_EQ(row, expected);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiWeights, testing::Values("kimi-k3-tiny", "kimi-k3-small"),
                         test::kimi_param_name);

class KimiBadWeights : public testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::temp_directory_path() / ("md_kimi_bad_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = root_ / "kimi-k3-tiny";
    fs::copy(test::kimi_fixture_path("kimi-k3-tiny"), dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string bind_error() const {
    try {
      const Checkpoint checkpoint(dir_.string());
      bind_kimi_k3_weights(checkpoint, parse_kimi_k3_config(read_config_files(dir_.string())));
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }
  // The shard holding layer 1 (the first of two).
  fs::path shard() const { return dir_ / "model-00001-of-00002.safetensors"; }
  // Sets byte `index` of tensor `name`'s data in the first shard.
  void set_byte(const std::string& name, std::size_t index, char value) {
    std::vector<char> bytes = test::read_all(shard());
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), sizeof length);
    const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + length);
    const auto begin = header.at(name).at("data_offsets")[0].get<std::size_t>();
    bytes[8 + length + begin + index] = value;
    test::write_all(shard(), bytes);
  }

  fs::path root_, dir_;
};

const std::string kExpertScale =
    "language_model.model.layers.1.block_sparse_moe.experts.2.w3.weight_scale";

TEST_F(KimiBadWeights, TheIntactCopyBinds) {
  EXPECT_EQ(bind_error(), "");
}

TEST_F(KimiBadWeights, AnE8m0ScaleByteOfZeroIsRefused) {
  set_byte(kExpertScale, 4 * 5 + 1, 0);  // row 5, group 1 (4 groups a row)
  test::expect_contains(bind_error(), {kExpertScale, "scale byte 0", "row 5, group 1"});
}

TEST_F(KimiBadWeights, AnE8m0ScaleByteOf255IsRefused) {
  set_byte(kExpertScale, 0, static_cast<char>(255));
  test::expect_contains(bind_error(), {kExpertScale, "scale byte 255", "row 0, group 0"});
}

TEST_F(KimiBadWeights, AMissingTensorIsNamed) {
  const std::string name = "language_model.model.layers.1.self_attn.dt_bias";
  test::edit_header(shard(), [&](nlohmann::ordered_json& h) {
    h["language_model.model.layers.1.self_attn.dt_biaX"] = h[name];
    h.erase(name);
  });
  // The index is consistent with the damaged shard (a checkpoint that never had the tensor).
  const fs::path index = dir_ / "model.safetensors.index.json";
  const std::vector<char> text = test::read_all(index);
  nlohmann::json map = nlohmann::json::parse(text.begin(), text.end());
  map["weight_map"].erase(name);
  const std::string dumped = map.dump();
  test::write_all(index, std::vector<char>(dumped.begin(), dumped.end()));
  test::expect_contains(bind_error(), {name, "missing"});
}

// An A_log with fewer entries than heads (2 of the fixture's 8, as a narrower F32 tensor whose
// bytes still lie inside the shard).
TEST_F(KimiBadWeights, AnALogShorterThanTheHeadsIsRefused) {
  const std::string name = "language_model.model.layers.1.self_attn.A_log";
  test::edit_header(shard(), [&](nlohmann::ordered_json& h) {
    h[name]["shape"] = {2};
    h[name]["data_offsets"][1] = h[name]["data_offsets"][0].get<std::size_t>() + 8;
  });
  test::expect_contains(bind_error(), {name, "2 entries", "4 KDA heads"});
}

TEST_F(KimiBadWeights, ATransposedProjectionIsNamedWithBothShapes) {
  const std::string name = "language_model.model.layers.1.self_attn.f_b_proj.weight";
  test::edit_header(shard(), [&](nlohmann::ordered_json& h) { h[name]["shape"] = {32, 128}; });
  test::expect_contains(bind_error(), {name, "[32, 128]", "[128, 32]"});
}

}  // namespace
}  // namespace md
