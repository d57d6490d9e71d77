#include "engine/token_candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

namespace md::engine {
namespace {

std::vector<float> random_values(std::size_t n, uint32_t seed, int distinct_levels = 0) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    x = distinct_levels > 0 ? static_cast<float>(rng() % distinct_levels)
                            : static_cast<float>(rng()) / 4294967296.0f;
  }
  return v;
}

std::vector<Candidate> as_candidates(const std::vector<float>& v) {
  std::vector<Candidate> c;
  for (std::size_t i = 0; i < v.size(); ++i) c.push_back({v[i], static_cast<int32_t>(i)});
  return c;
}

std::vector<int32_t> ids_of(std::vector<Candidate> c) {
  std::sort(c.begin(), c.end(), ranks_before);
  std::vector<int32_t> ids;
  for (const auto& x : c) ids.push_back(x.id);
  return ids;
}

TEST(SelectTopK, MatchesAFullSortWithTiesAndNaNOnBothPaths) {
  for (int levels : {0, 7}) {  // 7 levels: many ties at the boundary
    std::vector<float> v = random_values(5000, 3, levels);
    v[17] = std::numeric_limits<float>::quiet_NaN();
    std::vector<Candidate> reference = as_candidates(v);
    reference[17].value = -std::numeric_limits<float>::infinity();
    std::sort(reference.begin(), reference.end(), ranks_before);
    for (int k : {1, 40, 300, 1000, 4999, 5000, 9000}) {  // 1000+: the nth_element path
      std::vector<Candidate> out;
      select_top_k(v, k, out);
      const std::size_t keep = std::min<std::size_t>(k, v.size());
      ASSERT_EQ(out.size(), keep);
      const std::vector<Candidate> expected(reference.begin(), reference.begin() + keep);
      EXPECT_EQ(ids_of(out), ids_of(expected)) << "k=" << k << " levels=" << levels;
    }
  }
}

TEST(SelectTopK, ZeroOrNegativeKSelectsNothing) {
  std::vector<Candidate> out = {{1.0f, 0}};
  select_top_k(std::vector<float>{1.0f, 2.0f}, 0, out);
  EXPECT_TRUE(out.empty());
}

// The reference: sort, then walk until the running mass passes the target.
std::size_t reference_prefix(std::vector<Candidate> c, double target, bool inclusive) {
  std::sort(c.begin(), c.end(), ranks_before);
  double acc = 0.0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    acc += c[i].value;
    if (inclusive ? acc >= target : acc > target) return i + 1;
  }
  return c.size();
}

// Sizes on both sides of the histogram cutoff; every third seed has heavy ties (5 distinct
// values), which drives the radix levels down to buckets of identical values.
TEST(MassSelector, MatchesASortedWalkAndLeavesTheBoundaryLast) {
  MassSelector selector;  // reused across calls, as a sampler does
  for (uint32_t seed = 0; seed < 60; ++seed) {
    const std::size_t n = seed % 3 == 1 ? 20000 : seed % 3 == 2 ? 1100 + seed : 37 + seed;
    std::vector<float> values = random_values(n, seed, seed % 3 == 0 ? 5 : 0);
    for (float& v : values) v += 0.5f;  // positive, as the selector requires
    const std::vector<Candidate> c = as_candidates(values);
    double total = 0.0;
    for (const auto& x : c) total += x.value;
    std::mt19937 rng(seed);
    const double fraction = static_cast<double>(rng()) / 4294967296.0;
    const double target = total * fraction;
    const bool inclusive = seed % 4 < 2;
    const std::size_t expected = reference_prefix(c, target, inclusive);
    std::vector<Candidate> sorted = c;
    std::sort(sorted.begin(), sorted.end(), ranks_before);

    std::vector<Candidate> work = c;
    const Prefix got = selector.select_prefix(work, fraction, inclusive);
    ASSERT_EQ(got.count, expected) << "seed " << seed;
    // The prefix holds exactly the best `count`, and its last element ranks lowest among them.
    const std::vector<Candidate> head(work.begin(), work.begin() + static_cast<long>(got.count));
    EXPECT_EQ(ids_of(head),
              ids_of({sorted.begin(), sorted.begin() + static_cast<long>(got.count)}));
    EXPECT_EQ(work[got.count - 1].id, sorted[got.count - 1].id);
    double mass = 0.0;
    for (const auto& x : head) mass += x.value;
    EXPECT_NEAR(got.mass, mass, 1e-9 * total);

    if (!inclusive) {
      EXPECT_EQ(selector.at_fraction(c, fraction).id, sorted[expected - 1].id);
    }
  }
}

TEST(MassSelector, AllEqualValuesFollowIdOrder) {
  MassSelector selector;
  const std::vector<Candidate> c = as_candidates(std::vector<float>(100000, 0.25f));
  EXPECT_EQ(selector.at_fraction(c, 1234.5 / 100000).id, 1234);
  std::vector<Candidate> work = c;
  EXPECT_EQ(selector.select_prefix(work, 500.0 / 100000, true).count, 500u);
  EXPECT_EQ(work[499].id, 499);
}

TEST(MassSelector, BeyondTheTotalTakesEveryPositiveCandidateAndNeverAZero) {
  MassSelector selector;
  for (std::size_t n : {5u, 5000u}) {  // quickselect and histogram paths
    std::vector<float> values(n, 0.0f);
    values[1] = 0.5f;
    values[3] = 0.25f;
    values[4] = 0.25f;
    const std::vector<Candidate> c = as_candidates(values);
    EXPECT_EQ(selector.at_fraction(c, 0.9).id, 4);
    EXPECT_EQ(selector.at_fraction(c, 1.5).id, 4);  // the lowest-ranked positive candidate
    std::vector<Candidate> work = c;
    const Prefix got = selector.select_prefix(work, 1.5, true);
    EXPECT_EQ(got.count, 3u);
    EXPECT_EQ(work[2].id, 4);
  }
}

}  // namespace
}  // namespace md::engine
