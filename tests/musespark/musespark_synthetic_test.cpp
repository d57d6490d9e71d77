// The built-in Muse Spark bench shapes (musespark_synthetic.h): their geometry and expert formats,
// deterministic weights, aliased expert slots, and the weight bytes a step reports having read.
#include "models/musespark/musespark_synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "base/error.h"
#include "models/musespark/musespark_experts.h"
#include "models/musespark/musespark_testing.h"

namespace md {
namespace {

TEST(MuseSynthetic, TinyHasTheSpecTestGeometry) {
  const MuseSparkConfig c = synthetic_musespark_config("muse-spark-tiny");
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.moe_hidden_size, 256);
  EXPECT_EQ(c.moe_intermediate_size, 96);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.num_experts_per_token, 4);
  EXPECT_EQ(c.sliding_window, 16);
  const std::vector<bool> full = {false, true, false, false, false, true};
  const std::vector<bool> nvfp4 = {false, true, true, true, true, false};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(c.is_full_attention(l), full[static_cast<std::size_t>(l)]) << "layer " << l;
    EXPECT_EQ(c.expert_formats[static_cast<std::size_t>(l)] == WeightFormat::kNVFP4,
              nvfp4[static_cast<std::size_t>(l)])
        << "layer " << l;
  }
}

TEST(MuseSynthetic, LayerShapeHasThePublishedWidthsForTwoLayers) {
  const MuseSparkConfig c = synthetic_musespark_config("muse-spark-layer");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.hidden_size, 8192);
  EXPECT_EQ(c.moe_hidden_size, 4096);
  EXPECT_EQ(c.moe_intermediate_size, 4096);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.num_experts_per_token, 8);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.num_key_value_heads, 16);
  EXPECT_EQ(c.vocab_size, 202048);
  EXPECT_EQ(c.vocab_used, 201818);  // the published model's trained ids (§1)
  EXPECT_EQ(c.sliding_window, 2048);
  EXPECT_FALSE(c.is_full_attention(0));
  EXPECT_TRUE(c.is_full_attention(1));
  EXPECT_EQ(c.expert_formats,
            (std::vector<WeightFormat>{WeightFormat::kBF16, WeightFormat::kNVFP4}));
}

TEST(MuseSynthetic, UnknownShapesAreRefusedByName) {
  EXPECT_FALSE(is_synthetic_musespark_shape("muse-spark"));
  try {
    (void)synthetic_musespark_config("muse-spark");
    FAIL() << "accepted an unknown shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'muse-spark' (known: muse-spark-tiny, "
                                         "muse-spark-layer)"),
              std::string::npos)
        << e.what();
  }
}

TEST(MuseSynthetic, AliasedExpertsReadTheirSlot) {
  MuseSparkConfig c = synthetic_musespark_config("muse-spark-tiny");
  std::vector<uint16_t> gate_up(4 * 2 * 96 * 256), down(4 * 256 * 96);
  MuseExperts e;
  e.stored_experts = 4;
  e.gate_up = gate_up.data();
  e.down = down.data();
  const auto bytes = [](const uint16_t* p) { return reinterpret_cast<const std::uint8_t*>(p); };
  const kernels::ExpertMatrices w = muse_expert_matrices(e, c);
  for (std::size_t expert : {1, 5, 13}) {
    EXPECT_EQ(w.gate[expert].data, bytes(gate_up.data() + 1 * 2 * 96 * 256)) << expert;
    EXPECT_EQ(w.up[expert].data, bytes(gate_up.data() + (1 * 2 + 1) * 96 * 256)) << expert;
    EXPECT_EQ(w.down[expert].data, bytes(down.data() + 1 * 256 * 96)) << expert;
  }
  e.stored_experts = 0;  // every expert its own
  EXPECT_EQ(muse_expert_matrices(e, c).down[5].data, bytes(down.data() + 5 * 256 * 96));
}

std::vector<float> decode_logits(MuseSparkModel& model, const std::vector<int32_t>& tokens) {
  std::vector<std::unique_ptr<SequenceState>> owned;
  std::vector<SequenceState*> states;
  std::vector<float> logits;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    owned.push_back(model.new_sequence(64));
    states.push_back(owned.back().get());
    model.forward(*owned.back(), std::vector<int32_t>{5, static_cast<int32_t>(10 + r)},
                  LogitRows::kLast, logits);
  }
  model.decode(states, tokens, logits);
  return logits;
}

TEST(MuseSynthetic, TinyDecodesTheSameBitsOnAnyThreadCount) {
  auto one = make_synthetic_musespark("muse-spark-tiny", ModelRunOptions{1});
  auto two = make_synthetic_musespark("muse-spark-tiny", ModelRunOptions{2});
  const std::vector<float> a = decode_logits(*one, {7, 300});
  const std::vector<float> b = decode_logits(*two, {7, 300});
  ASSERT_EQ(a.size(), 2u * 1024u);
  EXPECT_EQ(a, b);
  const MuseSparkConfig& c = one->config();
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t id = 0; id < c.vocab_size; ++id) {
      const float x = a[static_cast<std::size_t>(r * c.vocab_size + id)];
      if (id < c.vocab_used) {
        ASSERT_TRUE(std::isfinite(x)) << "row " << r << " id " << id;
        ASSERT_LE(std::fabs(x), c.final_logit_softcapping);
      } else {
        ASSERT_TRUE(std::isinf(x) && x < 0) << "row " << r << " id " << id;
      }
    }
  }
  // Different rows, different logits: the weights are not degenerate.
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 1024),
            std::vector<float>(a.begin() + 1024, a.end()));
}

// The bytes a step reports: the dense matrices once, and each expert its rows ran once.
TEST(MuseSynthetic, StepBytesCountEachExpertTheRowsChoseOnce) {
  testing::MuseProbe probe;
  auto model =
      make_synthetic_musespark("muse-spark-tiny", ModelRunOptions{1}, MuseSparkOptions{{}, &probe});
  const MuseSparkConfig& c = model->config();
  const std::size_t one_row = model->decode_weight_bytes();
  std::size_t per_expert_of_layer[2] = {3 * 256 * 96 * 2,
                                        3 * 256 * 96 / 2 + 3 * 256 * 96 / 16 + 12};
  std::size_t experts_of_one_row = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    experts_of_one_row += 4 * per_expert_of_layer[l > 0 && l < 5 ? 1 : 0];
  }
  const std::size_t dense = one_row - experts_of_one_row;

  for (const std::vector<int32_t>& tokens :
       {std::vector<int32_t>{7}, std::vector<int32_t>{7, 300, 41, 999}}) {
    const auto rows = static_cast<int64_t>(tokens.size());
    (void)decode_logits(*model, tokens);  // prefills record routes too: keep the last step's
    const auto step_routes = static_cast<int64_t>(c.num_layers * rows * 4);
    ASSERT_GE(static_cast<int64_t>(probe.routes.size()), step_routes);
    const std::vector<int32_t> routes(probe.routes.end() - step_routes, probe.routes.end());
    std::size_t expected = dense;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::set<int32_t> distinct(routes.begin() + l * rows * 4,
                                       routes.begin() + (l + 1) * rows * 4);
      expected += distinct.size() * per_expert_of_layer[l > 0 && l < 5 ? 1 : 0];
    }
    EXPECT_EQ(model->last_step_weight_bytes(), expected) << rows << " rows";
    if (rows == 1) {
      EXPECT_EQ(model->last_step_weight_bytes(), one_row);
    } else {
      EXPECT_GT(model->last_step_weight_bytes(), one_row);  // the rows chose different experts
    }
    probe.routes.clear();
  }
}

}  // namespace
}  // namespace md
