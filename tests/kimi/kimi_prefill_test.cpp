// Kimi K3 prompts as fused prefill programs (KimiStep in RowMode::kPrefill: KDA chunked per head
// over the chunk, latent appends and latent attention over its rows): bitwise the reference
// forward's logits (every row or the last), drafter taps and next decode step, in chunks of 5 rows
// (mega and ops, 1 and 3 threads, bf16 and f32 caches); the programs did run; a prompt of one
// token keeps the reference's recurrence.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>

#include "kimi_test_util.h"
#include "models/kimi/kimi_model.h"
#include "models/kimi/kimi_synthetic.h"

namespace md {
namespace {

constexpr char kSynthetic[] = "synthetic:";

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::unique_ptr<KimiModel> open(const std::string& fixture, ExecutorKind executor, int threads,
                                KvCacheType kv) {
  ModelRunOptions options;
  options.executor = executor;
  options.threads = threads;
  options.kv_cache = kv;
  options.prefill_rows = 5;
  std::unique_ptr<KimiModel> model =
      fixture.starts_with(kSynthetic)
          ? make_synthetic_kimi(fixture.substr(std::string(kSynthetic).size()), options)
          : std::make_unique<KimiModel>(test::kimi_fixture_path(fixture), options);
  model->set_tap_layers({0, model->config().num_layers - 1});
  return model;
}

struct Prefilled {
  std::vector<float> logits, taps, next;
};

Prefilled run(KimiModel& model, int64_t length, LogitRows rows) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(static_cast<int32_t>((i * 41 + 3) % 300));
  auto state = model.new_sequence(64);
  Prefilled out;
  model.forward(*state, ids, rows, out.logits);
  out.taps = model.last_taps();
  SequenceState* one = state.get();
  const int32_t next = 11;
  model.decode(std::span(&one, 1), std::span(&next, 1), out.next);
  return out;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

class KimiPrefillProgram : public ::testing::TestWithParam<std::string> {};

TEST_P(KimiPrefillProgram, EqualsTheReferenceForwardBitwise) {
  for (const KvCacheType kv : {KvCacheType::kBf16, KvCacheType::kF32}) {
    for (const LogitRows rows : {LogitRows::kAll, LogitRows::kLast}) {
      auto reference = open(GetParam(), ExecutorKind::kReference, 1, kv);
      const Prefilled want = run(*reference, 23, rows);
      ASSERT_EQ(want.taps.size(),
                static_cast<std::size_t>(23 * 2 * reference->config().hidden_size));
      EXPECT_EQ(reference->prefill_program_runs(), 0);
      for (const ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
        for (const int threads : {1, 3}) {
          SCOPED_TRACE(std::string(program::executor_name(executor)) + ", " +
                       std::to_string(threads) + " threads, " +
                       (kv == KvCacheType::kBf16 ? "bf16" : "f32") + " cache, " +
                       (rows == LogitRows::kAll ? "every row" : "last row"));
          auto model = open(GetParam(), executor, threads, kv);
          const Prefilled got = run(*model, 23, rows);
          EXPECT_TRUE(same_bits(got.logits, want.logits));
          EXPECT_TRUE(same_bits(got.taps, want.taps));
          EXPECT_TRUE(same_bits(got.next, want.next));
          EXPECT_EQ(model->prefill_program_runs(), 5);  // 4 × 5 + 3 rows
        }
      }
    }
  }
}

// A one-token prompt runs the recurrence (a one-row decode program), as the reference does for a
// single token: the same logits and taps.
TEST_P(KimiPrefillProgram, OneTokenKeepsTheRecurrence) {
  auto reference = open(GetParam(), ExecutorKind::kReference, 1, KvCacheType::kF32);
  auto model = open(GetParam(), ExecutorKind::kMega, 2, KvCacheType::kF32);
  const Prefilled want = run(*reference, 1, LogitRows::kLast);
  const Prefilled got = run(*model, 1, LogitRows::kLast);
  EXPECT_TRUE(same_bits(got.logits, want.logits));
  ASSERT_FALSE(want.taps.empty());
  EXPECT_TRUE(same_bits(got.taps, want.taps));
  EXPECT_TRUE(same_bits(got.next, want.next));
  EXPECT_EQ(model->prefill_program_runs(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiPrefillProgram,
                         ::testing::Values("kimi-k3-tiny", "kimi-k3-small",
                                           "synthetic:kimi-k3-edges"),
                         param_name);

}  // namespace
}  // namespace md
