#include "program/spin_budget.h"

#include <gtest/gtest.h>

namespace md::program {
namespace {

constexpr int64_t kMs = 1'000'000;

// A budget fed a scripted thread: a baseline observation at 0, then steps of `elapsed` wall time
// of which `waited` on the run queue.
class SpinBudgetTest : public ::testing::Test {
 protected:
  SpinBudgetTest() { budget.observe(delay, wall); }

  void steps(int64_t waited, int64_t elapsed, int count = SpinBudget::kPreemptedSteps) {
    for (int i = 0; i < count; ++i) budget.observe(delay += waited, wall += elapsed);
  }

  SpinBudget budget;
  int64_t delay = 0;
  int64_t wall = 0;
};

TEST(SpinBudget, StartsCalmWithTheLongSpin) {
  SpinBudget budget;
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
  budget.observe(5 * kMs, 100 * kMs);  // the first observation only sets the baseline
  EXPECT_FALSE(budget.contended());
}

TEST_F(SpinBudgetTest, AnEighthOfEachStepOnTheRunQueueThreeTimesInARowIsContention) {
  steps(kMs, 10 * kMs);  // 1 ms of 10: under an eighth
  EXPECT_FALSE(budget.contended());
  steps(kMs + kMs / 4, 10 * kMs, SpinBudget::kPreemptedSteps - 1);
  EXPECT_FALSE(budget.contended());
  steps(kMs + kMs / 4, 10 * kMs, 1);  // 1.25 ms of 10: an eighth
  EXPECT_TRUE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kContendedRounds);
}

TEST_F(SpinBudgetTest, ATransientPreemptionIsNotContention) {
  // 10 ms of 26 (another process ran), twice, then a calm step, then twice again.
  steps(10 * kMs, 26 * kMs, SpinBudget::kPreemptedSteps - 1);
  steps(0, 10 * kMs, 1);
  steps(10 * kMs, 26 * kMs, SpinBudget::kPreemptedSteps - 1);
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
}

TEST_F(SpinBudgetTest, ShortWaitsAreNeverContentionHoweverShortTheStep) {
  // 150 µs of a 300 µs step: half of it, but under kPreemptedNs (a tick, a wake-up).
  steps(150'000, 300'000);
  EXPECT_FALSE(budget.contended());
  steps(SpinBudget::kPreemptedNs, 2 * SpinBudget::kPreemptedNs);
  EXPECT_TRUE(budget.contended());
}

TEST_F(SpinBudgetTest, ContentionLastsKContendedStepsCalmObservations) {
  steps(5 * kMs, 10 * kMs);
  ASSERT_TRUE(budget.contended());
  for (int i = 1; i < SpinBudget::kContendedSteps; ++i) {
    steps(0, 10 * kMs, 1);
    ASSERT_TRUE(budget.contended()) << i;
  }
  steps(0, 10 * kMs, 1);
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
}

TEST(SpinBudget, AnUnknownRunQueueChangesNothing) {
  SpinBudget budget;
  int64_t wall = 0;
  budget.observe(-1, wall);
  budget.observe(-1, wall += 10 * kMs);
  EXPECT_FALSE(budget.contended());
  budget.observe(0, wall += 10 * kMs);
  budget.observe(-1, wall += 10 * kMs);  // not a baseline: the next known value compares with 0
  int64_t delay = 0;
  for (int i = 0; i < SpinBudget::kPreemptedSteps; ++i)
    budget.observe(delay += 5 * kMs, wall += 10 * kMs);
  EXPECT_TRUE(budget.contended());
}

TEST(ThreadClock, ReadsAMonotoneRunQueueTotalAndWallClock) {
  const ThreadClock first = ThreadClock::now();
  volatile double sink = 0;
  for (int i = 0; i < 100000; ++i) sink = sink + i;
  const ThreadClock second = ThreadClock::now();
  EXPECT_GT(second.wall_ns, first.wall_ns);
  EXPECT_EQ(first.run_delay_ns < 0, second.run_delay_ns < 0);
  EXPECT_GE(second.run_delay_ns, first.run_delay_ns);
#if defined(__linux__)
  EXPECT_GE(first.run_delay_ns, 0) << "/proc/thread-self/schedstat unreadable";
#endif
}

}  // namespace
}  // namespace md::program
