// The DFlash2 round as a fused megakernel program (dflash2_step.h) against the reference forward
// it was lowered from: every proposal bitwise equal — block logits, tokens and q — over many
// rounds with context appends of every size a verify step commits, a long prompt over several
// windows, truncations, clone() and new_sequence(), at 1 and 2 threads, on the persistent team
// and op by op, greedy and sampled.
#include "models/drafters/dflash2/dflash2_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "dflash2_test_util.h"
#include "models/drafters/dflash2/dflash2_drafter.h"
#include "models/drafters/dflash2/dflash2_testing.h"

namespace md {
namespace {

using md::testing::DFlash2Ablation;

constexpr int64_t kWidth = 5 * 128;  // taps · hidden of tiny-dflash2
constexpr float kTemperature = 0.7f;

// Bitwise, not ==: -0.0 and 0.0 compare equal, NaN never does.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_same(const DraftProposal& reference, const DraftProposal& fused) {
  EXPECT_TRUE(same_bits(reference.logits, fused.logits));
  EXPECT_EQ(reference.tokens, fused.tokens);
  EXPECT_EQ(reference.q, fused.q);
}

// One sequence twice, driven alike: through the reference forward and through the program.
struct Twin {
  std::unique_ptr<SpeculativeDrafter> reference, fused;

  void append(const std::vector<float>& taps, int64_t rows) {
    reference->append_context(taps, rows);
    fused->append_context(taps, rows);
    ASSERT_EQ(reference->context_length(), fused->context_length());
  }
  void truncate(int64_t length) {
    reference->truncate_context(length);
    fused->truncate_context(length);
    ASSERT_EQ(fused->context_length(), length);
  }
  // A greedy and a sampled proposal, each compared bit for bit.
  void propose(int32_t anchor, const std::vector<double>& uniforms) {
    SCOPED_TRACE("anchor " + std::to_string(anchor) + " at " +
                 std::to_string(fused->context_length()));
    expect_same(reference->propose(anchor, 0.0f, {}, true), fused->propose(anchor, 0.0f, {}, true));
    expect_same(reference->propose(anchor, kTemperature, uniforms, true),
                fused->propose(anchor, kTemperature, uniforms, true));
  }
  Twin clone() const { return {reference->clone(), fused->clone()}; }
  Twin new_sequence() const { return {reference->new_sequence(), fused->new_sequence()}; }
};

struct Setting {
  int threads;
  ExecutorKind executor;
};

void PrintTo(const Setting& setting, std::ostream* out) {
  *out << setting.threads << " threads, "
       << (setting.executor == ExecutorKind::kOps ? "op by op" : "persistent team");
}

std::string setting_name(const ::testing::TestParamInfo<Setting>& info) {
  return std::to_string(info.param.threads) + "threads_" +
         (info.param.executor == ExecutorKind::kOps ? "ops" : "mega");
}

class DFlash2StepTest : public ::testing::TestWithParam<Setting> {
 protected:
  void SetUp() override { test::write_tiny_drafter(dir_.path(), test::tiny_dflash2_config()); }

  std::unique_ptr<DFlash2Drafter> drafter(ExecutorKind executor, int threads,
                                          DFlash2Ablation ablation = DFlash2Ablation::kNone) const {
    return std::make_unique<DFlash2Drafter>(dir_.str(), target_.view, threads,
                                            DFlash2Options{ablation, executor});
  }
  Twin twin() const {
    return {drafter(ExecutorKind::kReference, GetParam().threads),
            drafter(GetParam().executor, GetParam().threads)};
  }
  // Fresh taps for `rows` positions.
  std::vector<float> taps(int64_t rows) { return test::random_taps(rows, kWidth, ++seed_); }
  // The sampled walk's draws for the 7 draft rows.
  std::vector<double> uniforms() {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<double> u(7);
    for (double& x : u) x = uniform(rng_);
    return u;
  }

  test::TempDir dir_;
  test::TinyTarget target_{512, 128, 8};
  uint64_t seed_ = 0;
  std::mt19937_64 rng_{5};
};

TEST_P(DFlash2StepTest, RoundsWithEveryCommitSizeAfterALongPrompt) {
  Twin t = twin();
  t.propose(11, uniforms());  // empty context: the block alone
  t.append(taps(37), 37);     // over two windows of 16: the ring wraps
  t.propose(12, uniforms());
  // Speculative rounds: commits of 1..8 rows (a verify step's accepted drafts + bonus), twice
  // around, so the new rows' ring slots wrap at every offset.
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t rows = 1; rows <= DFlash2Step::kMaxNewContextRows; ++rows) {
      t.append(taps(rows), rows);
      t.propose(static_cast<int32_t>(100 + 8 * pass + rows), uniforms());
    }
  }
}

TEST_P(DFlash2StepTest, SeveralSmallAppendsBetweenRounds) {
  Twin t = twin();
  t.append(taps(20), 20);
  t.append(taps(3), 3);
  t.append(taps(4), 4);  // 7 pending: still one round's worth
  t.propose(5, uniforms());
  t.append(taps(5), 5);
  t.append(taps(6), 6);  // would overflow the pending rows: the first five are computed now
  t.propose(6, uniforms());
  t.append(taps(8), 8);
  t.append(taps(9), 9);  // a large append after pending rows keeps them in order
  t.propose(7, uniforms());
  t.append(taps(1), 1);
  t.append(taps(1), 1);
  t.propose(8, uniforms());
}

TEST_P(DFlash2StepTest, TruncationsAndReappends) {
  Twin t = twin();
  t.append(taps(40), 40);
  t.propose(1, uniforms());
  t.append(taps(6), 6);
  t.truncate(43);  // inside the pending rows: three of them are dropped unseen
  t.propose(2, uniforms());
  t.append(taps(4), 4);
  t.truncate(30);  // below the stored rows: the pending ones go, the ring is rebuilt
  t.propose(3, uniforms());
  t.append(taps(2), 2);
  t.propose(4, uniforms());
  t.truncate(31);
  t.append(taps(8), 8);
  t.propose(5, uniforms());
  t.truncate(0);
  t.propose(6, uniforms());
  t.append(taps(3), 3);
  t.propose(7, uniforms());
  t.append(taps(25), 25);
  t.propose(8, uniforms());
}

TEST_P(DFlash2StepTest, ClonesAndNewSequencesInterleaved) {
  Twin leader = twin();
  leader.append(taps(21), 21);
  leader.append(taps(3), 3);  // pending when cloned: the clone keeps them
  Twin follower = leader.clone();
  Twin other = leader.new_sequence();
  std::vector<float> shared = taps(5);
  for (int round = 0; round < 4; ++round) {
    leader.propose(static_cast<int32_t>(round), uniforms());
    other.append(taps(round + 2), round + 2);
    follower.append(shared, 5);
    other.propose(static_cast<int32_t>(50 + round), uniforms());
    follower.propose(static_cast<int32_t>(round), uniforms());
    leader.append(shared, 5);
  }
  EXPECT_EQ(leader.fused->context_length(), follower.fused->context_length());
  // The same context, however it was reached, drafts the same block.
  expect_same(leader.fused->propose(9, 0.0f, {}, true), follower.fused->propose(9, 0.0f, {}, true));
}

TEST_P(DFlash2StepTest, PendingFeaturesAreTheAppendedOnes) {
  auto reference = drafter(ExecutorKind::kReference, GetParam().threads);
  auto fused = drafter(GetParam().executor, GetParam().threads);
  std::vector<float> t = taps(12);
  std::vector<float> first(t.begin(), t.begin() + 10 * kWidth);
  std::vector<float> last(t.begin() + 10 * kWidth, t.end());
  for (auto* d : {reference.get(), fused.get()}) {
    d->append_context(first, 10);  // more than a round commits: computed at once
    d->append_context(last, 2);    // pending, then computed by the fused round's program
    d->propose(4, 0.0f, {});
  }
  for (int64_t p = 0; p < 12; ++p) {
    std::span<const float> a = reference->context_feature(p);
    std::span<const float> b = fused->context_feature(p);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << "position " << p;
  }
}

// The controls: the comparison does see a change in one tap of one pending row, or the anchor.
TEST_P(DFlash2StepTest, ADifferentInputChangesTheLogits) {
  std::vector<float> t = taps(30);
  auto a = drafter(GetParam().executor, GetParam().threads);
  auto b = drafter(GetParam().executor, GetParam().threads);
  a->append_context(std::vector<float>(t.begin(), t.begin() + 25 * kWidth), 25);
  b->append_context(std::vector<float>(t.begin(), t.begin() + 25 * kWidth), 25);
  std::vector<float> tail(t.begin() + 25 * kWidth, t.end());
  a->append_context(tail, 5);
  tail[3 * kWidth + 17] += 1e-3f;
  b->append_context(tail, 5);
  DraftProposal pa = a->propose(9, 0.0f, {}, true);
  EXPECT_FALSE(same_bits(pa.logits, b->propose(9, 0.0f, {}, true).logits));
  EXPECT_FALSE(same_bits(pa.logits, a->propose(10, 0.0f, {}, true).logits));
}

// Ablations are formulas of the reference forward only: asking for the program with one runs
// the reference.
TEST_P(DFlash2StepTest, AblationsRunTheReference) {
  std::vector<float> t = taps(20);
  auto program = drafter(GetParam().executor, GetParam().threads, DFlash2Ablation::kCausalBlock);
  auto reference =
      drafter(ExecutorKind::kReference, GetParam().threads, DFlash2Ablation::kCausalBlock);
  auto plain = drafter(GetParam().executor, GetParam().threads);
  for (auto* d : {program.get(), reference.get(), plain.get()}) d->append_context(t, 20);
  DraftProposal causal = program->propose(4, 0.0f, {}, true);
  EXPECT_TRUE(same_bits(causal.logits, reference->propose(4, 0.0f, {}, true).logits));
  EXPECT_FALSE(same_bits(causal.logits, plain->propose(4, 0.0f, {}, true).logits));
}

INSTANTIATE_TEST_SUITE_P(Executors, DFlash2StepTest,
                         ::testing::Values(Setting{1, ExecutorKind::kMega},
                                           Setting{2, ExecutorKind::kMega},
                                           Setting{1, ExecutorKind::kOps},
                                           Setting{2, ExecutorKind::kOps}),
                         setting_name);

}  // namespace
}  // namespace md
