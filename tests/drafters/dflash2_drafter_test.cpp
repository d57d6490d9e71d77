// The DFlash2 block forward and selector walk against the double-precision oracle of
// dflash2_oracle.h on a random tiny-dflash2 checkpoint (spec §14 shapes, window 16), plus the
// context bookkeeping: chunked appends, truncation, the window edge and threads.
#include "models/drafters/dflash2/dflash2_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "base/error.h"
#include "dflash2_oracle.h"
#include "dflash2_test_util.h"
#include "models/drafters/dflash2/dflash2_testing.h"

namespace md {
namespace {

using md::testing::DFlash2Ablation;
using test::OracleRound;
using test::Vec;

// f32 activations against an f64 oracle: the logits of this tiny model are sums of a few
// hundred products per stage over ~12 stages, each adding a few f32 ulps (~6e-8) of relative
// error; 1e-4 of the largest logit leaves a wide margin for that and none for a wrong formula
// (the negative controls below miss by more than 10x).
constexpr double kLogitTolerance = 1e-4;

double block_error(const std::vector<float>& logits, const OracleRound& want) {
  double diff = 0, scale = 0;
  std::size_t vocab = want.logits[0].size();
  for (std::size_t i = 0; i < want.logits.size(); ++i) {
    for (std::size_t v = 0; v < vocab; ++v) {
      diff = std::max(diff, std::abs(logits[i * vocab + v] - want.logits[i][v]));
      scale = std::max(scale, std::abs(want.logits[i][v]));
    }
  }
  return diff / scale;
}

class DFlash2DrafterTest : public ::testing::Test {
 protected:
  void SetUp() override { weights_ = test::write_tiny_drafter(dir_.path(), config_); }

  std::unique_ptr<DFlash2Drafter> drafter(int threads = 1, DFlash2Options options = {}) const {
    return std::make_unique<DFlash2Drafter>(dir_.str(), target_.view, threads, options);
  }
  test::Dflash2Oracle oracle() const {
    return test::Dflash2Oracle(config_, weights_, target_.view);
  }
  int64_t width() const { return 5 * 128; }
  std::vector<float> taps(int64_t rows, uint64_t seed) const {
    return test::random_taps(rows, width(), seed);
  }
  // Rows [first, first + n) of a taps array.
  std::vector<float> slice(const std::vector<float>& all, int64_t first, int64_t n) const {
    return {all.begin() + first * width(), all.begin() + (first + n) * width()};
  }

  test::TempDir dir_;
  nlohmann::json config_ = test::tiny_dflash2_config();
  test::TinyTarget target_{512, 128, 8};
  test::RefWeights weights_;
};

// The oracle's own greedy walk over its double logits: top-k sorted (ties to the lower id),
// scores from the codebooks, first maximum. Returns the path up to the first row whose top-k
// boundary or score margin is a near-tie (where f32 and f64 may legitimately disagree).
std::vector<int32_t> oracle_path(const test::Dflash2Oracle& oracle, const OracleRound& round,
                                 int32_t anchor, int64_t k, double near_tie) {
  std::vector<int32_t> path;
  int32_t prev = anchor;
  for (std::size_t i = 0; i < round.logits.size(); ++i) {
    const Vec& l = round.logits[i];
    std::vector<int32_t> order(l.size());
    for (std::size_t v = 0; v < l.size(); ++v) order[v] = static_cast<int32_t>(v);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return l[static_cast<std::size_t>(a)] > l[static_cast<std::size_t>(b)];
    });
    auto kk = static_cast<std::size_t>(k);
    if (l[static_cast<std::size_t>(order[kk - 1])] - l[static_cast<std::size_t>(order[kk])] <
        near_tie)
      break;
    std::vector<std::pair<int32_t, double>> cands;
    for (std::size_t j = 0; j < kk; ++j)
      cands.emplace_back(order[j], l[static_cast<std::size_t>(order[j])]);
    Vec s = oracle.scores(prev, round.rho[i], cands);
    Vec sorted = s;
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] < near_tie) break;
    prev = cands[static_cast<std::size_t>(std::max_element(s.begin(), s.end()) - s.begin())].first;
    path.push_back(prev);
  }
  return path;
}

TEST_F(DFlash2DrafterTest, ReportsItsShape) {
  auto d = drafter();
  EXPECT_EQ(d->block_size(), 8);
  EXPECT_EQ(d->tap_layers(), (std::vector<int64_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(d->context_length(), 0);
}

TEST_F(DFlash2DrafterTest, ContextFeaturesMatchTheOracle) {
  auto d = drafter();
  test::Dflash2Oracle o = oracle();
  std::vector<float> t = taps(5, 1);
  d->append_context(t, 5);
  o.append(t, 5);
  for (int64_t p = 0; p < 5; ++p) {
    std::span<const float> got = d->context_feature(p);
    const Vec& want = o.feature(p);
    double diff = 0, scale = 0;
    for (std::size_t c = 0; c < want.size(); ++c) {
      diff = std::max(diff, std::abs(got[c] - want[c]));
      scale = std::max(scale, std::abs(want[c]));
    }
    EXPECT_LT(diff / scale, 1e-5) << "position " << p;
  }
}

TEST_F(DFlash2DrafterTest, BlockLogitsAndGreedyPathMatchTheOracle) {
  // Context lengths around the window (16): none, short, one short of it, at it, past it (the
  // ring wraps and the oldest positions drop out row by row).
  for (int64_t length : {0, 1, 5, 15, 16, 17, 40}) {
    SCOPED_TRACE("context length " + std::to_string(length));
    auto d = drafter();
    test::Dflash2Oracle o = oracle();
    std::vector<float> t = taps(length, 100 + static_cast<uint64_t>(length));
    // Appended in uneven pieces, with a proposal in between (as the speculative loop does).
    for (int64_t first = 0; first < length;) {
      int64_t n = std::min<int64_t>(1 + first % 7, length - first);
      d->append_context(slice(t, first, n), n);
      d->propose(static_cast<int32_t>(first), 0.0f, {});
      first += n;
    }
    o.append(t, length);
    for (int32_t anchor : {3, 499}) {
      DraftProposal got = d->propose(anchor, 0.0f, {}, true);
      OracleRound want = o.propose(anchor);
      double error = block_error(got.logits, want);
      EXPECT_LT(error, kLogitTolerance) << "anchor " << anchor;
      std::vector<int32_t> path = oracle_path(o, want, anchor, 4, 1e-3);
      EXPECT_GE(path.size(), 5u) << "too many near-ties for a meaningful path check";
      for (std::size_t i = 0; i < path.size(); ++i) EXPECT_EQ(got.tokens[i], path[i]) << i;
      ASSERT_EQ(got.q.size(), 7u);
      for (std::size_t i = 0; i < 7; ++i) {
        EXPECT_EQ(got.q[i], (std::vector<std::pair<int32_t, float>>{{got.tokens[i], 1.0f}}));
      }
    }
    EXPECT_EQ(d->context_length(), length);
  }
}

TEST_F(DFlash2DrafterTest, WrongFormulasMissTheOracleByTenTimesTheBound) {
  test::Dflash2Oracle o = oracle();
  std::vector<float> t = taps(20, 7);
  o.append(t, 20);
  OracleRound right = o.propose(42);
  struct Control {
    DFlash2Ablation ablation;
    test::OracleOptions same;
  };
  for (Control control : {Control{DFlash2Ablation::kCausalBlock, {true, false}},
                          Control{DFlash2Ablation::kSkipBlockConv, {false, true}}}) {
    SCOPED_TRACE(static_cast<int>(control.ablation));
    auto d = drafter(1, DFlash2Options{control.ablation});
    d->append_context(t, 20);
    DraftProposal got = d->propose(42, 0.0f, {}, true);
    EXPECT_GT(block_error(got.logits, right), 10 * kLogitTolerance);
    // ... while the same change made to the oracle agrees again: the controls change exactly
    // the formula they name.
    EXPECT_LT(block_error(got.logits, o.propose(42, control.same)), kLogitTolerance);
  }
}

TEST_F(DFlash2DrafterTest, ChunkingAndThreadsDoNotChangeABit) {
  std::vector<float> t = taps(30, 3);
  auto whole = drafter();
  whole->append_context(t, 30);
  auto rows = drafter(2);
  for (int64_t p = 0; p < 30; ++p) rows->append_context(slice(t, p, 1), 1);
  DraftProposal a = whole->propose(9, 0.0f, {}, true);
  DraftProposal b = rows->propose(9, 0.0f, {}, true);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST_F(DFlash2DrafterTest, TruncationRewindsExactly) {
  std::vector<float> t = taps(40, 4);
  std::vector<float> other = taps(10, 5);
  auto d = drafter();
  d->append_context(t, 40);
  d->propose(1, 0.0f, {});  // caches the K/V of positions 25..39
  d->truncate_context(25);  // those are gone, and 10..24 were never cached
  EXPECT_EQ(d->context_length(), 25);
  auto fresh = drafter();
  fresh->append_context(slice(t, 0, 25), 25);
  EXPECT_EQ(d->propose(1, 0.0f, {}, true).logits, fresh->propose(1, 0.0f, {}, true).logits);
  // A new continuation after the cut.
  d->append_context(other, 10);
  fresh->append_context(other, 10);
  EXPECT_EQ(d->propose(2, 0.0f, {}, true).logits, fresh->propose(2, 0.0f, {}, true).logits);
  d->truncate_context(0);
  auto empty = drafter();
  EXPECT_EQ(d->propose(2, 0.0f, {}, true).logits, empty->propose(2, 0.0f, {}, true).logits);
}

TEST_F(DFlash2DrafterTest, PositionsOutsideTheWindowAreNotSeen) {
  // s = 40, window 16: no block row sees positions <= 24 (row 0 sees 25..39).
  std::vector<float> t = taps(40, 6);
  std::vector<float> changed = t;
  for (int64_t i = 0; i < 25 * width(); ++i) changed[static_cast<std::size_t>(i)] += 1.0f;
  auto a = drafter();
  auto b = drafter();
  a->append_context(t, 40);
  b->append_context(changed, 40);
  EXPECT_EQ(a->propose(5, 0.0f, {}, true).logits, b->propose(5, 0.0f, {}, true).logits);
  // ... and position 25 is seen.
  for (int64_t i = 25 * width(); i < 26 * width(); ++i)
    changed[static_cast<std::size_t>(i)] += 1.0f;
  auto c = drafter();
  c->append_context(changed, 40);
  EXPECT_NE(a->propose(5, 0.0f, {}, true).logits, c->propose(5, 0.0f, {}, true).logits);
}

TEST_F(DFlash2DrafterTest, SampledProposalsFollowTheTemperedSelector) {
  std::vector<float> t = taps(12, 8);
  auto d = drafter();
  d->append_context(t, 12);
  test::Dflash2Oracle o = oracle();
  o.append(t, 12);
  OracleRound want = o.propose(77);
  std::vector<double> uniforms = {0.05, 0.95, 0.5, 0.3, 0.7, 0.01, 0.999};
  DraftProposal got = d->propose(77, 0.7f, uniforms);
  EXPECT_TRUE(got.logits.empty());
  ASSERT_EQ(got.tokens.size(), 7u);
  ASSERT_EQ(got.q.size(), 7u);
  int32_t prev = 77;
  for (std::size_t i = 0; i < 7; ++i) {
    // q_i is softmax(score / T) over the row's candidates given the drawn predecessor.
    std::vector<std::pair<int32_t, double>> cands;
    for (const auto& [id, p] : got.q[i])
      cands.emplace_back(id, want.logits[i][static_cast<std::size_t>(id)]);
    ASSERT_EQ(cands.size(), 4u);
    Vec s = o.scores(prev, want.rho[i], cands);
    double top = *std::max_element(s.begin(), s.end()), total = 0;
    for (double v : s) total += std::exp((v - top) / 0.7);
    double cdf = 0;
    int32_t drawn = -1;
    for (std::size_t k = 0; k < 4; ++k) {
      double p = std::exp((s[k] - top) / 0.7) / total;
      EXPECT_NEAR(got.q[i][k].second, p, 1e-4) << "row " << i;
      cdf += p;
      if (drawn < 0 && uniforms[i] < cdf) drawn = cands[k].first;
    }
    EXPECT_EQ(got.tokens[i], drawn) << "row " << i;
    prev = got.tokens[i];
  }
  // Same uniforms, same draws; the context is untouched by proposing.
  EXPECT_EQ(d->propose(77, 0.7f, uniforms).tokens, got.tokens);
  EXPECT_EQ(d->context_length(), 12);
}

TEST_F(DFlash2DrafterTest, RefusesBadArguments) {
  auto d = drafter();
  d->append_context(taps(2, 9), 2);
  EXPECT_THROW(d->propose(512, 0.0f, {}), Error);
  EXPECT_THROW(d->propose(-1, 0.0f, {}), Error);
  std::vector<double> few = {0.5, 0.5};
  EXPECT_THROW(d->propose(1, 0.5f, few), Error);
  std::vector<float> bad(width() + 1);
  EXPECT_THROW(d->append_context(bad, 1), Error);
  EXPECT_THROW(d->truncate_context(3), Error);
  EXPECT_THROW(d->truncate_context(-1), Error);
  EXPECT_EQ(d->context_length(), 2);
}

}  // namespace
}  // namespace md
