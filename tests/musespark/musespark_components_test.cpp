// Muse Spark's small rules, each on hand-made inputs: routing ties and the selection-only bias,
// the residual gate's clamp, the zero-centred norm scales, and a sliding layer's memory.
#include <gtest/gtest.h>

#include <cmath>

#include "models/musespark/musespark_routing.h"
#include "musespark_test_util.h"

namespace md::test {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

struct RoutingCase {
  MuseSparkConfig config;
  MuseLayerWeights weights;
};

// Four experts over a 2-wide stream, top-2: experts 0 and 1 have the same router row.
RoutingCase routing_case() {
  RoutingCase r;
  r.config.hidden_size = 2;
  r.config.num_experts = 4;
  r.config.num_experts_per_token = 2;
  r.config.output_multiplier = 1.0;
  r.weights.router = {1, 0, 1, 0, 0, 1, 0, 0};
  r.weights.router_bias = {0, 0, 0, 0};
  return r;
}

TEST(MuseRouting, TiesGoToTheLowestIndexInSelectionOrder) {
  RoutingCase r = routing_case();
  const float x[2] = {1.0f, 0.5f};
  const MuseRoute route = muse_route(r.weights, r.config, x);
  EXPECT_EQ(route.experts, (std::vector<int64_t>{0, 1}));
  EXPECT_FLOAT_EQ(route.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(route.weights[1], 0.5f);
}

// The correction bias changes which experts are chosen, never how they are weighted.
TEST(MuseRouting, TheBiasSelectsButDoesNotWeigh) {
  RoutingCase r = routing_case();
  r.weights.router_bias[3] = 0.3f;  // expert 3 scores sigmoid(0) = 0.5, selects at 0.8
  const float x[2] = {1.0f, 0.5f};
  const MuseRoute route = muse_route(r.weights, r.config, x);
  EXPECT_EQ(route.experts, (std::vector<int64_t>{3, 0}));
  const float s3 = 0.5f, s0 = sigmoid(1.0f);
  EXPECT_FLOAT_EQ(route.weights[0], s3 / (s3 + s0));
  EXPECT_FLOAT_EQ(route.weights[1], s0 / (s3 + s0));
}

TEST(MuseResidualGate, AlphaAndBetaKeepUnitNormUntilTheClampEngages) {
  const MuseResidualGate g =
      residual_gate_coefficients({0.0f, 0.5f, -1.0f, 4.0f}, 0.3, kResidualGateFloor);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(g.alpha[i] * g.alpha[i] + g.beta[i] * g.beta[i], 1.0, 1e-6) << i;
  }
  // g = 4: u = 13.3, sigmoid(−u)(1 + β) ≈ 3e-6, under the 1e-3 floor.
  EXPECT_FLOAT_EQ(g.alpha[3], std::sqrt(1e-3f));
  EXPECT_GT(g.alpha[3] * g.alpha[3] + g.beta[3] * g.beta[3], 1.0);
  const MuseResidualGate unclamped = residual_gate_coefficients({4.0f}, 0.3, 0.0);
  EXPECT_LT(unclamped.alpha[0], 2e-3f);
}

// Zero-centred norm weights are applied as f32(1 + γ) (transformers' form): the fixture's
// γ = 2^-9 and 3·2^-9, which bf16 rounding of 1 + γ would tie to 1 and 1 + 2^-7, stay exact.
TEST(MuseWeights, ZeroCentredScalesAreOnePlusGammaInF32) {
  auto model = load_muse("muse-spark-tiny");
  const MuseLayerWeights& layer = model->weights().layers[0];
  EXPECT_EQ(layer.input_norm[0], 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(layer.input_norm[1], 1.0f + 3 * std::ldexp(1.0f, -9));
  EXPECT_EQ(layer.pre_expert_norm[0], 1.0f + std::ldexp(1.0f, -9));
}

// A sliding layer holds a window of positions (and 8 spare) whatever the context; full layers
// grow.
TEST(MuseState, SlidingLayersHoldOnlyTheirWindow) {
  auto model = load_muse("muse-spark-tiny", KvCacheType::kBf16);
  const MuseSparkConfig& c = model->config();
  const std::vector<int32_t> ids = load_muse_goldens("muse-spark-tiny")[3].ids;  // 300 tokens
  auto state = model->new_sequence(512);
  std::vector<float> logits;
  model->forward(*state, ids, LogitRows::kLast, logits);
  const auto n = static_cast<std::size_t>(ids.size());
  const auto row = static_cast<std::size_t>(2 * c.kv_dim() * 2);  // K and V, bf16
  const std::size_t full = static_cast<std::size_t>(c.num_full_attention_layers()) * n * row;
  // The window plus the 8 slots that verify rows may overwrite before commit.
  const std::size_t ring =
      static_cast<std::size_t>(c.num_sliding_layers() * (c.sliding_window + 8)) * row;
  EXPECT_EQ(model->state_bytes_fixed(), ring);
  // What `info` reports from the config alone: the same sizes.
  const ConfigFootprint footprint = musespark_footprint(c, FootprintOptions{});
  int64_t reported = 0;
  for (const StateGroup& group : footprint.state) reported += group.bytes(static_cast<int64_t>(n));
  EXPECT_EQ(reported, static_cast<int64_t>(full + ring));
  EXPECT_EQ(model->state_bytes_per_token() * n, full);
  EXPECT_GE(state->bytes(), full + ring);
  EXPECT_LE(state->bytes(), 2 * full + ring);  // a full layer's storage grows by doubling
  EXPECT_LT(state->bytes(), static_cast<std::size_t>(c.num_layers) * n * row);
}

// What a decode step streams, from the bound tensors, against what `info` computes from the config
// alone (musespark_footprint): everything but the embedding table (one row a step) and the norm
// and gate vectors.
TEST(MuseWeights, DecodeBytesAgreeWithTheConfigFootprint) {
  auto model = load_muse("muse-spark-tiny");
  const ConfigFootprint footprint = musespark_footprint(model->config(), FootprintOptions{});
  int64_t expected = 0;
  for (const WeightGroup& group : footprint.weights) {
    if (group.kind == WeightKind::kEmbedding || group.kind == WeightKind::kNorms) continue;
    expected += group.read_bytes_per_token;
  }
  EXPECT_EQ(static_cast<int64_t>(model->decode_weight_bytes()), expected);
}

}  // namespace
}  // namespace md::test
