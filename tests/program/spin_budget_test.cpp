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

TEST(SpinBudget, AnEighthOfTheStepOnTheRunQueueIsContention) {
  SpinBudget budget;
  budget.observe(0, 0);
  budget.observe(kMs, 10 * kMs);  // 1 ms of 10 waiting: under an eighth
  EXPECT_FALSE(budget.contended());
  budget.observe(kMs + kMs + kMs / 4, 20 * kMs);  // 1.25 ms of 10: an eighth
  EXPECT_TRUE(budget.contended());
  EXPECT_EQ(budget.rounds(), SpinBudget::kContendedRounds);
}

TEST(SpinBudget, ShortWaitsAreNeverContentionHoweverShortTheStep) {
  SpinBudget budget;
  budget.observe(0, 0);
  // 150 µs of a 300 µs step: half of it, but under kPreemptedNs (a tick, a wake-up).
  budget.observe(150'000, 300'000);
  EXPECT_FALSE(budget.contended());
  budget.observe(150'000 + SpinBudget::kPreemptedNs, 300'000 + 2 * SpinBudget::kPreemptedNs);
  EXPECT_TRUE(budget.contended());
}

TEST(SpinBudget, ContentionLastsKContendedStepsCalmObservations) {
  SpinBudget budget;
  int64_t delay = 0, wall = 0;
  budget.observe(delay, wall);
  budget.observe(delay += 5 * kMs, wall += 10 * kMs);
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
  budget.observe(-1, 0);
  budget.observe(-1, 10 * kMs);
  EXPECT_FALSE(budget.contended());
  budget.observe(0, 10 * kMs);
  budget.observe(-1, 20 * kMs);  // not a baseline: the next known value compares with 0 at 10 ms
  budget.observe(5 * kMs, 30 * kMs);
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
