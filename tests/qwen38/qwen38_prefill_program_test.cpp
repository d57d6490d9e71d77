// Qwen3.8 / Qwen3.5 prompts as fused prefill programs (Qwen38Step in RowMode::kPrefill): on every
// fixture (dense and MoE), a prompt run by the programs (mega, ops, any thread count) gives
// bitwise the reference forward's logits (every row or the last), state, drafter taps and next
// decode step, with the chunked delta rule (whose chunks start where the reference's do) and with
// the recurrence.
#include <gtest/gtest.h>

#include "qwen38_test_util.h"

namespace md::test {
namespace {

std::vector<int32_t> prompt_of(int64_t length, int seed) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back(static_cast<int32_t>((i * 211 + seed * 31 + 5) % 500));
  return ids;
}

std::unique_ptr<Qwen38Model> open(const std::string& fixture, ExecutorKind executor,
                                  bool chunked = true, int threads = 2,
                                  KvCacheType kv = KvCacheType::kF32) {
  ModelRunOptions run;
  run.threads = threads;
  run.kv_cache = kv;
  run.executor = executor;
  run.prefill_rows = 16;  // a 45-token prompt is three chunks, the last ragged
  Qwen38Options options;
  options.chunked_delta_rule = chunked;
  options.delta_rule_chunk = 8;  // two delta-rule chunks per program chunk
  auto model = std::make_unique<Qwen38Model>(qwen38_fixture_dir(fixture), run, options);
  model->set_tap_layers({0, model->config().num_layers - 1});
  return model;
}

struct Prefilled {
  std::unique_ptr<SequenceState> state;
  std::vector<float> logits, taps, next;
};

// `ids` fed in calls of `split` tokens (one call when empty), then one decode step.
Prefilled run(Qwen38Model& model, const std::vector<int32_t>& ids, LogitRows rows,
              std::vector<std::size_t> split = {}) {
  if (split.empty()) split = {ids.size()};
  Prefilled out{model.new_sequence(64), {}, {}, {}};
  std::vector<float> logits;
  std::size_t at = 0;
  for (std::size_t part : split) {
    model.forward(*out.state, std::span(ids).subspan(at, part), rows, logits);
    out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    out.taps.insert(out.taps.end(), model.last_taps().begin(), model.last_taps().end());
    at += part;
  }
  std::unique_ptr<SequenceState> after = out.state->clone();
  SequenceState* states[] = {after.get()};
  model.decode(states, std::vector<int32_t>{17}, out.next);
  return out;
}

void expect_same(Qwen38Model& model, const Prefilled& got, const Prefilled& want,
                 const std::string& what) {
  EXPECT_TRUE(same_bits(got.logits, want.logits)) << what << ": logits";
  EXPECT_TRUE(same_state(model, *got.state, *want.state)) << what << ": state";
  EXPECT_TRUE(same_bits(got.taps, want.taps)) << what << ": taps";
  EXPECT_TRUE(same_bits(got.next, want.next)) << what << ": next step";
}

class Qwen38PrefillProgram : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen38PrefillProgram, EqualsTheReferenceForwardBitwise) {
  const std::vector<int32_t> ids = prompt_of(45, 1);
  for (bool chunked : {true, false}) {
    auto reference = open(GetParam(), ExecutorKind::kReference, chunked);
    for (LogitRows rows : {LogitRows::kAll, LogitRows::kLast}) {
      Prefilled want = run(*reference, ids, rows);
      ASSERT_EQ(want.logits.size(), static_cast<std::size_t>((rows == LogitRows::kAll ? 45 : 1) *
                                                             reference->vocab_size()));
      ASSERT_EQ(want.taps.size(),
                static_cast<std::size_t>(45 * 2 * reference->config().hidden_size));
      for (ExecutorKind kind : {ExecutorKind::kMega, ExecutorKind::kOps}) {
        auto model = open(GetParam(), kind, chunked);
        const std::string what = std::string(chunked ? "chunked" : "recurrent") +
                                 (rows == LogitRows::kAll ? ", every row" : ", last row") +
                                 ", executor " + std::to_string(static_cast<int>(kind));
        expect_same(*model, run(*model, ids, rows), want, what);
        EXPECT_EQ(model->prefill_program_runs(), 3) << what;  // 16 + 16 + 13 rows
      }
    }
    EXPECT_EQ(reference->prefill_program_runs(), 0);
  }
}

// With a bf16 KV cache (the default) the programs round and store keys as the reference does.
TEST_P(Qwen38PrefillProgram, Bf16CacheEqualsTheReferenceBitwise) {
  const std::vector<int32_t> ids = prompt_of(45, 3);
  auto reference = open(GetParam(), ExecutorKind::kReference, true, 2, KvCacheType::kBf16);
  auto model = open(GetParam(), ExecutorKind::kMega, true, 2, KvCacheType::kBf16);
  Prefilled want = run(*reference, ids, LogitRows::kLast);
  Prefilled got = run(*model, ids, LogitRows::kLast);
  EXPECT_TRUE(same_bits(got.logits, want.logits));
  EXPECT_TRUE(same_bits(got.taps, want.taps));
  EXPECT_TRUE(same_bits(got.next, want.next));
  EXPECT_EQ(model->prefill_program_runs(), 3);
}

// The caller's split (1 + 20 + 24 tokens) and the thread count change nothing either.
TEST_P(Qwen38PrefillProgram, CallerSplitsAndThreadCountsAgree) {
  const std::vector<int32_t> ids = prompt_of(45, 2);
  const std::vector<std::size_t> split = {1, 20, 24};
  auto reference = open(GetParam(), ExecutorKind::kReference);
  Prefilled want = run(*reference, ids, LogitRows::kLast, split);
  for (int threads : {1, 3}) {
    auto model = open(GetParam(), ExecutorKind::kMega, true, threads);
    expect_same(*model, run(*model, ids, LogitRows::kLast, split), want,
                std::to_string(threads) + " threads");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen38PrefillProgram,
                         ::testing::ValuesIn(qwen38_fixture_names()), fixture_test_name);

}  // namespace
}  // namespace md::test
