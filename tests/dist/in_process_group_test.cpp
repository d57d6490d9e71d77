// In-process ranks (dist/in_process_group.h): every collective gives every rank what it asked
// for, sums in rank order with the same bits on every rank, collectives repeat without mixing
// rounds, and a rank's abort wakes the others with its message instead of leaving them waiting.
#include "dist/in_process_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace md::dist {
namespace {

// Runs body(rank) on one thread per rank; rethrows nothing (bodies record their own results).
void on_every_rank(InProcessGroup& group, const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&group, &body, r] { body(group.rank(r)); });
  }
  for (std::thread& t : threads) t.join();
}

// Rank r's i-th value: distinct per rank and index, with magnitudes that make float addition
// order-dependent (so a sum in another order shows).
float part(int rank, int i) {
  const float scales[] = {1.0f, 3.0e-8f, -1.0f, 7.0e7f};
  return scales[(rank + i) % 4] * (1.0f + 0.1f * static_cast<float>(rank * 31 + i));
}

class InProcessGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessGroupTest, AllGatherBroadcastAndBarrier) {
  const int ranks = GetParam();
  InProcessGroup group(ranks);
  std::vector<std::vector<int32_t>> gathered(static_cast<std::size_t>(ranks));
  std::vector<int64_t> broadcast(static_cast<std::size_t>(ranks));
  on_every_rank(group, [&](Communicator& c) {
    EXPECT_EQ(c.size(), ranks);
    EXPECT_EQ(c.transport(), "in-process");
    const int32_t mine[2] = {c.rank() * 10, c.rank() * 10 + 1};
    std::vector<int32_t>& out = gathered[static_cast<std::size_t>(c.rank())];
    out.resize(static_cast<std::size_t>(2 * ranks));
    c.all_gather(mine, sizeof mine, out.data());
    int64_t value = c.rank() == ranks - 1 ? 4242 : -1;
    c.broadcast(&value, sizeof value, ranks - 1);
    broadcast[static_cast<std::size_t>(c.rank())] = value;
    c.barrier();
  });
  for (int r = 0; r < ranks; ++r) {
    for (int s = 0; s < ranks; ++s) {
      EXPECT_EQ(gathered[static_cast<std::size_t>(r)][static_cast<std::size_t>(2 * s)], s * 10);
      EXPECT_EQ(gathered[static_cast<std::size_t>(r)][static_cast<std::size_t>(2 * s + 1)],
                s * 10 + 1);
    }
    EXPECT_EQ(broadcast[static_cast<std::size_t>(r)], 4242);
  }
}

TEST_P(InProcessGroupTest, AllReduceSumsInRankOrderWithTheSameBitsEverywhere) {
  const int ranks = GetParam();
  constexpr int kN = 37;
  InProcessGroup group(ranks);
  std::vector<std::vector<float>> results(static_cast<std::size_t>(ranks));
  on_every_rank(group, [&](Communicator& c) {
    std::vector<float> data(kN);
    for (int i = 0; i < kN; ++i) data[static_cast<std::size_t>(i)] = part(c.rank(), i);
    c.all_reduce_sum(data.data(), kN);
    results[static_cast<std::size_t>(c.rank())] = data;
  });
  int order_sensitive = 0;
  for (int i = 0; i < kN; ++i) {
    float left_to_right = part(0, i), right_to_left = part(ranks - 1, i);
    for (int r = 1; r < ranks; ++r) left_to_right += part(r, i);
    for (int r = ranks - 2; r >= 0; --r) right_to_left += part(r, i);
    if (left_to_right != right_to_left) ++order_sensitive;
    for (int r = 0; r < ranks; ++r) {
      const float got = results[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
      EXPECT_EQ(std::memcmp(&got, &left_to_right, sizeof got), 0) << "rank " << r << " value " << i;
    }
  }
  // The parts are chosen so that the order shows (a control on the check above).
  if (ranks >= 3) {
    EXPECT_GT(order_sensitive, 0);
  }
}

TEST_P(InProcessGroupTest, ManyRoundsDoNotMix) {
  const int ranks = GetParam();
  constexpr int kRounds = 2000;
  InProcessGroup group(ranks);
  std::vector<int> mismatches(static_cast<std::size_t>(ranks), 0);
  on_every_rank(group, [&](Communicator& c) {
    std::vector<int32_t> out(static_cast<std::size_t>(ranks));
    for (int round = 0; round < kRounds; ++round) {
      const int32_t mine = round * 100 + c.rank();
      c.all_gather(&mine, sizeof mine, out.data());
      for (int s = 0; s < ranks; ++s) {
        if (out[static_cast<std::size_t>(s)] != round * 100 + s) {
          ++mismatches[static_cast<std::size_t>(c.rank())];
        }
      }
    }
  });
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcessGroupTest, ::testing::Values(1, 2, 3, 4));

TEST(InProcessGroup, AnAbortWakesTheWaitingRanksWithItsMessage) {
  constexpr int kRanks = 3;
  InProcessGroup group(kRanks);
  std::vector<std::string> errors(kRanks);
  on_every_rank(group, [&](Communicator& c) {
    try {
      if (c.rank() == 1) {
        c.abort("cannot load shard 1: disk full");
        c.barrier();  // an aborted group refuses every later collective too
      } else {
        float x = 1;
        c.all_reduce_sum(&x, 1);
      }
    } catch (const Error& e) {
      errors[static_cast<std::size_t>(c.rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_EQ(e, "rank 1 failed: cannot load shard 1: disk full");
  }
}

TEST(InProcessGroup, RefusesBadRanks) {
  EXPECT_THROW(InProcessGroup(0), Error);
  InProcessGroup group(2);
  EXPECT_THROW(group.rank(2), Error);
  EXPECT_THROW(group.rank(-1), Error);
}

}  // namespace
}  // namespace md::dist
