#include "program/spin_budget.h"

#include <gtest/gtest.h>

namespace md::program {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(SpinBudget, StartsCalmWithTheLongSpin) {
  SpinBudget budget;
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
  budget.observe(5 * kMs, 100 * kMs);  // the first observation only sets the baseline
  EXPECT_FALSE(budget.contended());
}

// Three steps in a row with waits of `waited` in steps of `elapsed`.
void preempt(SpinBudget& budget, int64_t& delay, int64_t& wall, int64_t waited, int64_t elapsed,
             int steps = SpinBudget::kPreemptedSteps) {
  for (int i = 0; i < steps; ++i) budget.observe(delay += waited, wall += elapsed);
}

TEST(SpinBudget, AnEighthOfEachStepOnTheRunQueueThreeTimesInARowIsContention) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(delay, wall);
  preempt(budget, delay, wall, kMs, 10 * kMs);  // 1 ms of 10: under an eighth
  EXPECT_FALSE(budget.contended());
  preempt(budget, delay, wall, kMs + kMs / 4, 10 * kMs, SpinBudget::kPreemptedSteps - 1);
  EXPECT_FALSE(budget.contended());
  preempt(budget, delay, wall, kMs + kMs / 4, 10 * kMs, 1);  // 1.25 ms of 10: an eighth
  EXPECT_TRUE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kContendedRounds);
}

TEST(SpinBudget, ATransientPreemptionIsNotContention) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(delay, wall);
  // 10 ms of 26 (another process ran), twice, then a calm step, then twice again.
  preempt(budget, delay, wall, 10 * kMs, 26 * kMs, SpinBudget::kPreemptedSteps - 1);
  budget.observe(delay, wall += 10 * kMs);
  preempt(budget, delay, wall, 10 * kMs, 26 * kMs, SpinBudget::kPreemptedSteps - 1);
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
}

TEST(SpinBudget, ShortWaitsAreNeverContentionHoweverShortTheStep) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(delay, wall);
  // 150 µs of a 300 µs step: half of it, but under kPreemptedNs (a tick, a wake-up).
  preempt(budget, delay, wall, 150'000, 300'000);
  EXPECT_FALSE(budget.contended());
  preempt(budget, delay, wall, SpinBudget::kPreemptedNs, 2 * SpinBudget::kPreemptedNs);
  EXPECT_TRUE(budget.contended());
}

TEST(SpinBudget, ContentionLastsKContendedStepsCalmObservations) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(delay, wall);
  preempt(budget, delay, wall, 5 * kMs, 10 * kMs);
  ASSERT_TRUE(budget.contended());
  for (int i = 1; i < SpinBudget::kContendedSteps; ++i) {
    budget.observe(delay, wall += 10 * kMs);
    ASSERT_TRUE(budget.contended()) << i;
  }
  budget.observe(delay, wall += 10 * kMs);
  EXPECT_FALSE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kIdleRounds);
}

TEST(SpinBudget, AnUnknownRunQueueChangesNothing) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(-1, wall);
  budget.observe(-1, wall += 10 * kMs);
  EXPECT_FALSE(budget.contended());
  budget.observe(delay, wall += 10 * kMs);
  budget.observe(-1, wall += 10 * kMs);  // not a baseline: the next known value compares with 0
  preempt(budget, delay, wall, 5 * kMs, 10 * kMs);
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
