// Muse Spark prompts as fused prefill programs (MuseStep in RowMode::kPrefill): a prompt longer
// than both fixtures' windows, run as programs in chunks of 5 rows (mega and ops, 1 and 3
// threads, bf16 and f32 caches), gives bitwise the reference forward's logits (every row or the
// last), drafter taps and next decode step; the programs did run.
#include <gtest/gtest.h>

#include <cstring>

#include "musespark_test_util.h"

namespace md::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Prefilled {
  std::vector<float> logits, taps, next;
};

Prefilled run(MuseSparkModel& model, LogitRows rows) {
  model.set_tap_layers({0, model.config().num_layers - 1});
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < 23; ++i)
    ids.push_back(static_cast<int32_t>((i * 53 + 7) % model.config().vocab_used));
  auto state = model.new_sequence(64);
  Prefilled out;
  model.forward(*state, ids, rows, out.logits);
  out.taps = model.last_taps();
  SequenceState* one = state.get();
  const int32_t next = 11;
  model.decode(std::span(&one, 1), std::span(&next, 1), out.next);
  return out;
}

class MusePrefillProgram : public ::testing::TestWithParam<std::string> {};

TEST_P(MusePrefillProgram, EqualsTheReferenceForwardBitwise) {
  for (const KvCacheType kv : {KvCacheType::kBf16, KvCacheType::kF32}) {
    for (const LogitRows rows : {LogitRows::kAll, LogitRows::kLast}) {
      auto reference = load_muse(GetParam(), kv, md::testing::MuseAblation::kNone, 1,
                                 DenseWeights::kAsStored, 5);
      ASSERT_TRUE(reference->set_executor(ExecutorKind::kReference));
      const Prefilled want = run(*reference, rows);
      ASSERT_EQ(want.taps.size(),
                static_cast<std::size_t>(23 * 2 * reference->config().hidden_size));
      EXPECT_EQ(reference->prefill_program_runs(), 0);
      for (const ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
        for (const int threads : {1, 3}) {
          SCOPED_TRACE(std::string(program::executor_name(executor)) + ", " +
                       std::to_string(threads) + " threads, " +
                       (kv == KvCacheType::kBf16 ? "bf16" : "f32") + " cache, " +
                       (rows == LogitRows::kAll ? "every row" : "last row"));
          auto model = load_muse(GetParam(), kv, md::testing::MuseAblation::kNone, threads,
                                 DenseWeights::kAsStored, 5);
          ASSERT_TRUE(model->set_executor(executor));
          const Prefilled got = run(*model, rows);
          EXPECT_TRUE(same_bits(got.logits, want.logits));
          EXPECT_TRUE(same_bits(got.taps, want.taps));
          EXPECT_TRUE(same_bits(got.next, want.next));
          EXPECT_EQ(model->prefill_program_runs(), 5);  // 4 × 5 + 3 rows
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MusePrefillProgram,
                         ::testing::ValuesIn(musespark_fixture_names()), fixture_test_name);

}  // namespace
}  // namespace md::test
