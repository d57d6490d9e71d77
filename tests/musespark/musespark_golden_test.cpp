// megadecode's Muse Spark reference forward against Hugging Face transformers' `muse_spark`
// (float32, eager attention, NVFP4 experts dequantised independently) on two scaled-down
// checkpoints; see tests/goldens/musespark/README.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "musespark_test_util.h"

namespace md::test {
namespace {

using md::testing::MuseAblation;

constexpr int64_t kCapacity = 512;
// f32 activations and KV against transformers in float32: the same formulas in f32, differing in
// summation order. At one token that is 1.4e-6 (tiny) / 3e-7 (small) of the largest |logit|; it
// grows with the prompt (4e-4 / 1.4e-4 at 300 tokens), amplified by attention that the QK norms
// and qk_scale_factor make sharp and by routing decisions near ties. 1e-3 of the largest |logit|
// (about 0.02, the softcap's saturated row setting the scale) is the bound; every formula
// change in the negative controls below costs over 1 (x1000).
constexpr double kF32Bound = 1e-3;
constexpr float kNearTie = 1e-3f;

// max |Δ| over max |golden| on the trained ids of every position (transformers does not mask the
// untrained tail; megadecode sets it to −∞, checked separately).
double trained_error(const MuseSparkConfig& c, const std::vector<float>& logits,
                     const std::vector<float>& golden) {
  double diff = 0, scale = 0;
  const std::size_t rows = golden.size() / static_cast<std::size_t>(c.vocab_size);
  for (std::size_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < c.vocab_used; ++i) {
      const std::size_t at =
          t * static_cast<std::size_t>(c.vocab_size) + static_cast<std::size_t>(i);
      diff = std::max(diff, std::abs(static_cast<double>(logits[at]) - golden[at]));
      scale = std::max(scale, std::abs(static_cast<double>(golden[at])));
    }
  }
  return diff / scale;
}

double worst_prompt_error(MuseSparkModel& model, const std::vector<MuseGoldenPrompt>& goldens) {
  double worst = 0;
  for (const MuseGoldenPrompt& golden : goldens) {
    auto state = model.new_sequence(kCapacity);
    std::vector<float> logits;
    model.forward(*state, golden.ids, LogitRows::kAll, logits);
    EXPECT_EQ(logits.size(), golden.logits.size());
    const double error = trained_error(model.config(), logits, golden.logits);
    std::printf("  prompt of %zu: %.3g\n", golden.ids.size(), error);
    worst = std::max(worst, error);
  }
  return worst;
}

class MuseGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(MuseGolden, PromptLogitsMatchTransformersWithF32Cache) {
  auto model = load_muse(GetParam());
  std::vector<MuseGoldenPrompt> goldens = load_muse_goldens(GetParam());
  ASSERT_EQ(goldens.size(), 4u);
  EXPECT_GT(static_cast<int64_t>(goldens[2].ids.size()), model->config().sliding_window);
  const double error = worst_prompt_error(*model, goldens);
  std::printf("%s: max |dlogit| / max |logit| = %.3g (f32 KV)\n", GetParam().c_str(), error);
  RecordProperty("max_relative_logit_error_f32", std::to_string(error));
  EXPECT_LE(error, kF32Bound);
}

// Every negative control changes one formula; each must fail the bound the model passes.
TEST_P(MuseGolden, EachFormulaChangeFailsTheBound) {
  std::vector<MuseGoldenPrompt> goldens = load_muse_goldens(GetParam());
  for (const MuseAblation ablation : {MuseAblation::kRopeOnNopeLayers, MuseAblation::kNoGateClamp,
                                      MuseAblation::kWindowOneLonger}) {
    auto model = load_muse(GetParam(), KvCacheType::kF32, ablation);
    const double error = worst_prompt_error(*model, goldens);
    std::printf("%s, ablation %d: %.3g\n", GetParam().c_str(), static_cast<int>(ablation), error);
    EXPECT_GT(error, 10 * kF32Bound) << "ablation " << static_cast<int>(ablation);
  }
}

// The untrained ids are −∞; transformers leaves them, and there they often hold the largest
// logit, so forgetting the mask changes the greedy token (the ablation's negative control).
TEST_P(MuseGolden, UntrainedIdsAreMaskedAndTheMaskMatters) {
  std::vector<MuseGoldenPrompt> goldens = load_muse_goldens(GetParam());
  const MuseGoldenPrompt& golden = goldens[3];
  for (const MuseAblation ablation : {MuseAblation::kNone, MuseAblation::kNoTailMask}) {
    auto model = load_muse(GetParam(), KvCacheType::kF32, ablation);
    const MuseSparkConfig& c = model->config();
    auto state = model->new_sequence(kCapacity);
    std::vector<float> logits;
    model->forward(*state, golden.ids, LogitRows::kAll, logits);
    int64_t tail_wins = 0;
    for (std::size_t t = 0; t < golden.ids.size(); ++t) {
      const float* row = logits.data() + t * static_cast<std::size_t>(c.vocab_size);
      if (argmax(row, c.vocab_size) >= c.vocab_used) ++tail_wins;
      if (ablation == MuseAblation::kNone) {
        for (int64_t i = c.vocab_used; i < c.vocab_size; ++i) {
          ASSERT_EQ(row[i], -std::numeric_limits<float>::infinity());
        }
      }
    }
    if (ablation == MuseAblation::kNone) {
      EXPECT_EQ(tail_wins, 0);
    } else {
      EXPECT_GT(tail_wins, static_cast<int64_t>(golden.ids.size()) / 2);
    }
  }
}

// Prefill, then one decode step per token: the greedy tokens transformers chose, up to the first
// near tie.
TEST_P(MuseGolden, GreedyContinuationsMatchTransformers) {
  auto model = load_muse(GetParam());
  int64_t compared = 0;
  for (const MuseGoldenPrompt& golden : load_muse_goldens(GetParam())) {
    if (golden.greedy.empty()) continue;
    auto state = model->new_sequence(kCapacity);
    std::vector<float> logits;
    model->forward(*state, golden.ids, LogitRows::kLast, logits);
    for (std::size_t step = 0; step < golden.greedy.size(); ++step) {
      if (golden.greedy_margin[step] < kNearTie) break;
      const int32_t token = argmax(logits.data(), model->config().vocab_size);
      ASSERT_EQ(token, golden.greedy[step]) << "step " << step;
      ++compared;
      model->forward(*state, std::vector<int32_t>{token}, LogitRows::kLast, logits);
    }
  }
  EXPECT_GE(compared, 60);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MuseGolden, ::testing::ValuesIn(musespark_fixture_names()),
                         fixture_test_name);

}  // namespace
}  // namespace md::test
