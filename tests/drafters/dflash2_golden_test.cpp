// The DFlash2 drafter on the tiny-dflash2 fixture (with its tiny-qwen38 target's embedding and
// head) against the float64 reference goldens of tests/goldens/dflash2 (README there): context
// features, block logits of five rounds around the 16-position window, the selector's top-k,
// scores, greedy and sampled walks, and the exact-tie case. The drafter's rounds run three ways
// (the fused program on its persistent team, the same op by op, the reference forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../support/golden_math.h"
#include "io/checkpoint.h"
#include "io/safetensors_file.h"
#include "models/common/config_files.h"
#include "models/drafters/dflash2/dflash2_drafter.h"
#include "models/drafters/dflash2/dflash2_selector.h"
#include "models/drafters/dflash2/dflash2_testing.h"
#include "models/drafters/dflash2/dflash2_weights.h"
#include "models/qwen38/qwen38_model.h"

namespace md {
namespace {

using md::testing::DFlash2Ablation;

namespace fs = std::filesystem;

// f32 activations from bf16 weights and bf16-exact taps against float64, no rounding points on
// either side: each of the ~12 stages (fc, norms, projections, conv, attention, MLP, head) adds a
// few f32 ulps (6e-8) of its output's scale. Measured: 1.7–2.5e-7 of the largest logit (0.7),
// about the goldens' own float32 storage. 1e-5 (the README's f32 expectation) leaves 40x of
// headroom for other vector paths and summation orders, yet a single bf16 rounding point (0.6%
// in the README's bf16 mode) fails it, and the wrong formulas below (causal block: 0.47, no
// conv: 1.3) miss it by more than four orders of magnitude.
constexpr double kLogitTolerance = 1e-5;
constexpr double kFeatureTolerance = 1e-5;  // ctx: one matmul and one norm in f32
constexpr float kTemperature = 0.7f;        // the goldens' sampled walk

constexpr int64_t kRounds = 5, kDrafts = 7, kTopK = 4, kVocab = 512, kHidden = 128, kRank = 8;

// Under ctest the fixtures are regenerated into the build's golden dir; a test binary run by
// hand falls back to the ones scripts/setup writes into build/fixtures.
std::string fixture(const std::string& family, const std::string& name) {
  for (fs::path dir : {fs::path(MD_GOLDEN_DIR) / family / name,
                       fs::path(MD_SOURCE_DIR) / "build" / "fixtures" / name}) {
    if (fs::exists(dir / "config.json")) return dir.string();
  }
  ADD_FAILURE() << "fixture " << name << " not found: run through ctest (fixture dflash2.fixtures)"
                << " or scripts/setup";
  return "";
}

kernels::Bf16Matrix matrix(const Checkpoint& checkpoint, const std::string& name) {
  const TensorView& t = checkpoint.at(name);
  return {reinterpret_cast<const uint16_t*>(t.data), t.shape[0], t.shape[1]};
}

double max_abs(const float* a, const float* b, std::size_t n) {
  double diff = 0;
  for (std::size_t i = 0; i < n; ++i) diff = std::max(diff, std::abs(double{a[i]} - b[i]));
  return diff;
}

class DFlash2Golden : public ::testing::Test {
 protected:
  void SetUp() override {
    draft_dir_ = fixture("dflash2", "tiny-dflash2");
    std::string target_dir = fixture("qwen38", "tiny-qwen38");
    ASSERT_FALSE(draft_dir_.empty() || target_dir.empty());
    target_checkpoint_ = std::make_unique<Checkpoint>(target_dir);
    target_.embed_tokens = kernels::WeightMatrix::of(
        matrix(*target_checkpoint_, "model.language_model.embed_tokens.weight"));
    target_.lm_head = kernels::WeightMatrix::of(matrix(*target_checkpoint_, "lm_head.weight"));
    target_.hidden_size = kHidden;
    target_.vocab_size = kVocab;
    target_.num_layers = 8;
    golden_ = std::make_unique<SafetensorsFile>(std::string(MD_SOURCE_DIR) +
                                                "/tests/goldens/dflash2/tiny-dflash2.safetensors");
    taps_ = test::tensor_values<float>(*golden_, "taps");
    s_ = test::tensor_values<int32_t>(*golden_, "round.s");
    anchor_ = test::tensor_values<int32_t>(*golden_, "round.anchor");
    logits_ = test::tensor_values<float>(*golden_, "round.logits");
  }

  std::unique_ptr<DFlash2Drafter> drafter(DFlash2Ablation ablation = DFlash2Ablation::kNone,
                                          int threads = 1) const {
    return std::make_unique<DFlash2Drafter>(draft_dir_, target_, threads,
                                            DFlash2Options{ablation, executor_});
  }
  // Positions [length, end) appended in pieces of at most a block, as verify steps commit them
  // (the fused rounds compute such pieces inside their program).
  void append_as_committed(SpeculativeDrafter& d, int64_t end) const {
    while (d.context_length() < end) {
      int64_t first = d.context_length();
      int64_t last = std::min(end, first + 8);
      d.append_context(taps(first, last), last - first);
    }
  }
  std::span<const float> taps(int64_t first, int64_t end) const {
    int64_t width = 5 * kHidden;
    return std::span<const float>(taps_).subspan(static_cast<std::size_t>(first * width),
                                                 static_cast<std::size_t>((end - first) * width));
  }
  const float* golden_logits(int64_t round) const {
    return logits_.data() + round * kDrafts * kVocab;
  }
  // Relative max error of a round's block logits (rows 1..7) against the golden.
  double logit_error(const std::vector<float>& got, int64_t round) const {
    std::size_t n = static_cast<std::size_t>(kDrafts * kVocab);
    const float* want = golden_logits(round);
    return test::relative_error(got.data(), want, n);
  }
  // The drafter with the context of round j: taps of positions 0..s-1.
  DraftProposal run_round(DFlash2Drafter& d, int64_t round, float temperature = 0,
                          std::span<const double> uniforms = {}) const {
    int64_t s = s_[static_cast<std::size_t>(round)];
    if (d.context_length() > s) d.truncate_context(s);
    append_as_committed(d, s);
    return d.propose(anchor_[static_cast<std::size_t>(round)], temperature, uniforms, true);
  }

  std::string draft_dir_;
  std::unique_ptr<Checkpoint> target_checkpoint_;
  TargetView target_;
  std::unique_ptr<SafetensorsFile> golden_;
  std::vector<float> taps_;
  std::vector<int32_t> s_, anchor_;
  std::vector<float> logits_;
  ExecutorKind executor_ = ExecutorKind::kMega;
};

// The golden comparisons of the drafter's rounds, once per executor.
class DFlash2GoldenRounds : public DFlash2Golden,
                            public ::testing::WithParamInterface<ExecutorKind> {
 protected:
  void SetUp() override {
    DFlash2Golden::SetUp();
    executor_ = GetParam();
  }
};

std::string executor_name(const ::testing::TestParamInfo<ExecutorKind>& info) {
  switch (info.param) {
    case ExecutorKind::kMega:
      return "mega";
    case ExecutorKind::kOps:
      return "ops";
    case ExecutorKind::kReference:
      break;
  }
  return "reference";
}

INSTANTIATE_TEST_SUITE_P(Executors, DFlash2GoldenRounds,
                         ::testing::Values(ExecutorKind::kReference, ExecutorKind::kMega,
                                           ExecutorKind::kOps),
                         executor_name);

TEST_P(DFlash2GoldenRounds, ContextFeatures) {
  auto d = drafter();
  // A prompt's prefill, then single positions each followed by a round (in which the fused
  // program computes the new position's feature).
  d->append_context(taps(0, 30), 30);
  while (d->context_length() < 40) {
    append_as_committed(*d, d->context_length() + 1);
    d->propose(1, 0.0f, {});
  }
  std::vector<float> want = test::tensor_values<float>(*golden_, "ctx");
  std::vector<float> got;
  for (int64_t p = 0; p < 40; ++p) {
    std::span<const float> f = d->context_feature(p);
    got.insert(got.end(), f.begin(), f.end());
  }
  EXPECT_LT(test::relative_error(got.data(), want.data(), want.size()), kFeatureTolerance);
}

TEST_P(DFlash2GoldenRounds, BlockLogitsTopKAndGreedyPath) {
  std::vector<int32_t> topk = test::tensor_values<int32_t>(*golden_, "round.topk_ids");
  std::vector<float> gap = test::tensor_values<float>(*golden_, "round.topk_gap");
  std::vector<float> margin = test::tensor_values<float>(*golden_, "round.greedy_margin");
  std::vector<int32_t> path = test::tensor_values<int32_t>(*golden_, "round.greedy_path");
  // Rounds in order on one drafter (its K/V cache carries over, as in the speculative loop),
  // then in reverse on another (every round truncates: the cache must be rebuilt).
  auto forward = drafter();
  auto backward = drafter(DFlash2Ablation::kNone, 2);
  std::vector<DraftProposal> got(kRounds);
  for (int64_t j = 0; j < kRounds; ++j) got[static_cast<std::size_t>(j)] = run_round(*forward, j);
  run_round(*backward, kRounds - 1);
  for (int64_t j = kRounds - 1; j >= 0; --j) {
    EXPECT_EQ(run_round(*backward, j).logits, got[static_cast<std::size_t>(j)].logits) << j;
  }
  for (int64_t j = 0; j < kRounds; ++j) {
    SCOPED_TRACE("round " + std::to_string(j) +
                 ", s = " + std::to_string(s_[static_cast<std::size_t>(j)]));
    const DraftProposal& p = got[static_cast<std::size_t>(j)];
    double error = logit_error(p.logits, j);
    EXPECT_LT(error, kLogitTolerance);
    // Discrete outputs are compared where the golden's margins exceed twice the absolute logit
    // error (the README's rule); the selector's pairwise term adds errors of the same tiny size,
    // so the path's margin gets a further factor of 4.
    double slack =
        2 * max_abs(p.logits.data(), golden_logits(j), static_cast<std::size_t>(kDrafts * kVocab));
    for (int64_t i = 0; i < kDrafts; ++i) {
      auto at = static_cast<std::size_t>(j * kDrafts + i);
      if (gap[at] <= slack) continue;
      std::vector<dflash2::Candidate> c =
          dflash2::top_candidates(p.logits.data() + i * kVocab, kVocab, kTopK);
      for (int64_t k = 0; k < kTopK; ++k)
        EXPECT_EQ(c[static_cast<std::size_t>(k)].id,
                  topk[at * kTopK + static_cast<std::size_t>(k)]);
    }
    int64_t compared = 0;
    for (int64_t i = 0; i < kDrafts; ++i) {
      auto at = static_cast<std::size_t>(j * kDrafts + i);
      if (gap[at] <= slack || margin[at] <= 4 * slack) break;
      EXPECT_EQ(p.tokens[static_cast<std::size_t>(i)], path[at]) << "draft " << i + 1;
      ++compared;
    }
    // Under f32 every step is comparable (README): a shorter comparison means a larger error.
    EXPECT_EQ(compared, kDrafts);
  }
}

TEST_F(DFlash2Golden, WrongFormulasMissByTenTimesTheBound) {
  for (DFlash2Ablation ablation :
       {DFlash2Ablation::kCausalBlock, DFlash2Ablation::kSkipBlockConv}) {
    auto d = drafter(ablation);
    double worst = 0;
    for (int64_t j = 0; j < kRounds; ++j)
      worst = std::max(worst, logit_error(run_round(*d, j).logits, j));
    EXPECT_GT(worst, 10 * kLogitTolerance) << static_cast<int>(ablation);
  }
}

// The selector alone, fed the golden logits and ρ: top-k, scores and both walks, with the
// fixture's codebooks.
class DFlash2GoldenSelector : public DFlash2Golden {
 protected:
  void SetUp() override {
    DFlash2Golden::SetUp();
    config_ = parse_dflash2_config(read_config_files(draft_dir_));
    checkpoint_ = std::make_unique<Checkpoint>(draft_dir_);
    weights_ = bind_dflash2_weights(config_, *checkpoint_);
  }

  std::vector<std::vector<dflash2::Candidate>> candidates(const float* logits) const {
    std::vector<std::vector<dflash2::Candidate>> rows;
    for (int64_t i = 0; i < kDrafts; ++i) {
      rows.push_back(dflash2::top_candidates(logits + i * kVocab, kVocab, kTopK));
    }
    return rows;
  }
  // Scores along a given path (prev = anchor, then the path's tokens).
  std::vector<double> scores_along(int32_t anchor,
                                   const std::vector<std::vector<dflash2::Candidate>>& rows,
                                   const float* rho, const int32_t* path) const {
    std::vector<double> out;
    int32_t prev = anchor;
    for (int64_t i = 0; i < kDrafts; ++i) {
      std::vector<double> s = dflash2::selector_scores(weights_.selector, prev, rho + i * kRank,
                                                       rows[static_cast<std::size_t>(i)]);
      out.insert(out.end(), s.begin(), s.end());
      prev = path[i];
    }
    return out;
  }

  DFlash2Config config_;
  std::unique_ptr<Checkpoint> checkpoint_;
  DFlash2Weights weights_;
};

TEST_F(DFlash2GoldenSelector, WalksTheGoldenRounds) {
  std::vector<float> rho = test::tensor_values<float>(*golden_, "round.rho");
  std::vector<int32_t> topk = test::tensor_values<int32_t>(*golden_, "round.topk_ids");
  std::vector<float> topv = test::tensor_values<float>(*golden_, "round.topk_values");
  std::vector<float> greedy_scores = test::tensor_values<float>(*golden_, "round.greedy_scores");
  std::vector<int32_t> greedy_path = test::tensor_values<int32_t>(*golden_, "round.greedy_path");
  std::vector<float> sampled_scores = test::tensor_values<float>(*golden_, "round.sampled_scores");
  std::vector<float> sampled_q = test::tensor_values<float>(*golden_, "round.sampled_q");
  std::vector<int32_t> sampled_path = test::tensor_values<int32_t>(*golden_, "round.sampled_path");
  std::vector<float> uniform_f = test::tensor_values<float>(*golden_, "round.sampled_uniform");
  for (int64_t j = 0; j < kRounds; ++j) {
    SCOPED_TRACE("round " + std::to_string(j));
    auto row0 = static_cast<std::size_t>(j * kDrafts);
    int32_t anchor = anchor_[static_cast<std::size_t>(j)];
    const float* r = rho.data() + row0 * kRank;
    auto rows = candidates(golden_logits(j));
    for (std::size_t i = 0; i < kDrafts; ++i) {
      for (std::size_t k = 0; k < kTopK; ++k) {
        EXPECT_EQ(rows[i][k].id, topk[(row0 + i) * kTopK + k]);
        EXPECT_EQ(rows[i][k].logit, topv[(row0 + i) * kTopK + k]);
      }
    }
    // Greedy: the path and the scores along it (f32 inputs, double sums vs float64 stored as f32).
    dflash2::SelectorPath greedy = dflash2::select_path(weights_.selector, anchor, rows, r, 0, {});
    std::vector<double> s = scores_along(anchor, rows, r, greedy_path.data() + row0);
    for (std::size_t i = 0; i < kDrafts; ++i) {
      EXPECT_EQ(greedy.tokens[i], greedy_path[row0 + i]) << i;
      for (std::size_t k = 0; k < kTopK; ++k) {
        EXPECT_NEAR(s[i * kTopK + k], greedy_scores[(row0 + i) * kTopK + k], 1e-6);
      }
    }
    // Sampled at T = 0.7 with the golden uniforms (inverse CDF).
    std::vector<double> uniforms(uniform_f.begin() + static_cast<std::ptrdiff_t>(row0),
                                 uniform_f.begin() + static_cast<std::ptrdiff_t>(row0 + kDrafts));
    dflash2::SelectorPath sampled =
        dflash2::select_path(weights_.selector, anchor, rows, r, kTemperature, uniforms);
    s = scores_along(anchor, rows, r, sampled_path.data() + row0);
    for (std::size_t i = 0; i < kDrafts; ++i) {
      EXPECT_EQ(sampled.tokens[i], sampled_path[row0 + i]) << i;
      ASSERT_EQ(sampled.q[i].size(), static_cast<std::size_t>(kTopK));
      for (std::size_t k = 0; k < kTopK; ++k) {
        EXPECT_NEAR(s[i * kTopK + k], sampled_scores[(row0 + i) * kTopK + k], 1e-6);
        EXPECT_EQ(sampled.q[i][k].first, topk[(row0 + i) * kTopK + k]);
        EXPECT_NEAR(sampled.q[i][k].second, sampled_q[(row0 + i) * kTopK + k], 1e-6);
      }
    }
  }
}

TEST_F(DFlash2GoldenSelector, ExactTies) {
  std::vector<float> logits = test::tensor_values<float>(*golden_, "seltie.logits");
  std::vector<float> rho = test::tensor_values<float>(*golden_, "seltie.rho");
  std::vector<int32_t> topk = test::tensor_values<int32_t>(*golden_, "seltie.topk_ids");
  std::vector<float> topv = test::tensor_values<float>(*golden_, "seltie.topk_values");
  std::vector<float> scores = test::tensor_values<float>(*golden_, "seltie.scores");
  std::vector<int32_t> path = test::tensor_values<int32_t>(*golden_, "seltie.greedy_path");
  int32_t anchor = test::tensor_values<int32_t>(*golden_, "seltie.anchor")[0];
  auto rows = candidates(logits.data());
  for (std::size_t i = 0; i < kDrafts; ++i) {
    for (std::size_t k = 0; k < kTopK; ++k) {
      EXPECT_EQ(rows[i][k].id, topk[i * kTopK + k]) << i << "," << k;
      EXPECT_EQ(rows[i][k].logit, topv[i * kTopK + k]);
    }
  }
  dflash2::SelectorPath greedy =
      dflash2::select_path(weights_.selector, anchor, rows, rho.data(), 0, {});
  std::vector<double> s = scores_along(anchor, rows, rho.data(), path.data());
  for (std::size_t i = 0; i < kDrafts; ++i) {
    EXPECT_EQ(greedy.tokens[i], path[i]) << i;
    for (std::size_t k = 0; k < kTopK; ++k)
      EXPECT_NEAR(s[i * kTopK + k], scores[i * kTopK + k], 1e-6);
  }
}

TEST_P(DFlash2GoldenRounds, SampledProposalsReproduceTheGoldenWalk) {
  std::vector<float> uniform_f = test::tensor_values<float>(*golden_, "round.sampled_uniform");
  std::vector<float> q = test::tensor_values<float>(*golden_, "round.sampled_q");
  std::vector<int32_t> path = test::tensor_values<int32_t>(*golden_, "round.sampled_path");
  auto d = drafter();
  for (int64_t j = 0; j < kRounds; ++j) {
    SCOPED_TRACE("round " + std::to_string(j));
    auto row0 = static_cast<std::size_t>(j * kDrafts);
    std::vector<double> uniforms(uniform_f.begin() + static_cast<std::ptrdiff_t>(row0),
                                 uniform_f.begin() + static_cast<std::ptrdiff_t>(row0 + kDrafts));
    DraftProposal p = run_round(*d, j, kTemperature, uniforms);
    std::size_t compared = 0;
    for (std::size_t i = 0; i < kDrafts; ++i) {
      // A draw is comparable while its uniform is clear of the golden CDF's boundaries.
      double cdf = 0, clearance = 1;
      for (std::size_t k = 0; k < kTopK; ++k) {
        cdf += q[(row0 + i) * kTopK + k];
        clearance = std::min(clearance, std::abs(cdf - uniforms[i]));
      }
      if (clearance < 1e-4) break;
      EXPECT_EQ(p.tokens[i], path[row0 + i]) << "draft " << i + 1;
      for (std::size_t k = 0; k < kTopK; ++k) {
        EXPECT_NEAR(p.q[i][k].second, q[(row0 + i) * kTopK + k], 1e-5) << "draft " << i + 1;
      }
      ++compared;
    }
    // The goldens' uniforms clear every boundary by > 2e-3: all draws are comparable.
    EXPECT_EQ(compared, static_cast<std::size_t>(kDrafts));
  }
}

// The real target's view (Qwen38Model::target_view) drives the drafter exactly as the raw
// tensors do.
TEST_P(DFlash2GoldenRounds, DraftsFromTheQwen38TargetView) {
  ModelRunOptions run;
  Qwen38Model model(fixture("qwen38", "tiny-qwen38"), run);
  std::unique_ptr<SpeculativeDrafter> d =
      load_dflash2_drafter(draft_dir_, model.target_view(), 1, executor_);
  append_as_committed(*d, 20);
  DraftProposal p = d->propose(anchor_[2], 0, {}, true);
  auto reference = drafter();
  EXPECT_EQ(p.logits, run_round(*reference, 2).logits);
  EXPECT_LT(logit_error(p.logits, 2), kLogitTolerance);
}

}  // namespace
}  // namespace md
