// Llama under tensor parallelism, ranks as threads of this process (TensorParallelModel over
// dist::InProcessGroup), against the same model on one rank: greedy tokens identical, logits
// within the bound the changed summation order allows (below), one rank bitwise, a prompt run as
// prefill programs bitwise the same tokens decoded one by one, a batch step bitwise each
// sequence alone; on the tiny-llama fixture (4 query heads over 2 KV heads: 2 ranks take one KV
// head each, 4 ranks replicate them) and on SmolLM2-135M Q4_1 (9 over 3: 2 ranks split 6 / 3
// heads, 3 ranks one KV head each; 4 ranks are refused). Negative control: a communicator that
// drops one all-reduce breaks the bound.
//
// The bound. A row-parallel product (o, down) is summed per rank over its share of the inputs,
// then across the ranks, where one rank sums all inputs in one order: each output is the same
// real sum rounded along another path, off by a few f32 ulps of the terms' magnitudes (|Δ| ≲
// n·2⁻²⁴·Σ|terms|). Through the layers and the lm_head that stays a relative error of the order
// of 10⁻⁶ of the logits' scale (measured: 2·10⁻⁷ on tiny-llama, up to 1.6·10⁻⁶ on SmolLM2's 30
// layers; the tests print it). The bound, 5·10⁻⁵ of the largest |logit|, leaves a factor of 30
// for deeper models; a dropped all-reduce, which loses half of one residual update, is off by
// 0.6 of it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../support/tensor_parallel_support.h"
#include "base/error.h"
#include "dist/communicator.h"
#include "models/llama/llama_gguf_model.h"
#include "models/tensor_parallel_model.h"

namespace md {
namespace {

namespace fs = std::filesystem;

constexpr double kRelativeBound = 5e-5;
constexpr int64_t kContext = 128;

std::string tiny_llama() {
  return (fs::path(MD_GOLDEN_DIR) / "llama_hf" / "tiny-llama").string();
}
std::string smollm2() {
  return std::string(MD_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::vector<int32_t> prompt(int length, int64_t vocab, int seed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < length; ++i) {
    ids.push_back(static_cast<int32_t>((seed * 7919 + i * 104729 + 11) % vocab));
  }
  return ids;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int32_t argmax(const float* logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

// A prompt's logits (every row), then `steps` greedy decode steps: the tokens and each step's
// logits, concatenated.
struct Greedy {
  std::vector<float> prompt_logits, step_logits;
  std::vector<int32_t> tokens;
};

Greedy greedy(LanguageModel& model, const std::vector<int32_t>& tokens, int steps) {
  Greedy out;
  auto state = model.new_sequence(kContext);
  model.forward(*state, tokens, LogitRows::kAll, out.prompt_logits);
  const int64_t vocab = model.vocab_size();
  int32_t next = argmax(out.prompt_logits.data() + (tokens.size() - 1) * vocab, vocab);
  std::vector<float> logits;
  for (int s = 0; s < steps; ++s) {
    out.tokens.push_back(next);
    SequenceState* states[] = {state.get()};
    model.decode(states, std::vector<int32_t>{next}, logits);
    out.step_logits.insert(out.step_logits.end(), logits.begin(), logits.end());
    next = argmax(logits.data(), vocab);
  }
  out.tokens.push_back(next);
  return out;
}

using md::testing::relative_gap;

std::unique_ptr<LanguageModel> open_llama(const std::string& path, const ModelRunOptions& options) {
  return std::make_unique<LlamaGgufModel>(path, options);
}

ModelRunOptions options_for(ExecutorKind executor, int threads) {
  ModelRunOptions options;
  options.threads = threads;
  options.executor = executor;
  options.prefill_rows = 16;
  return options;
}

std::unique_ptr<TensorParallelModel> tensor_parallel(const std::string& path, int ranks,
                                                     ExecutorKind executor) {
  return std::make_unique<TensorParallelModel>(
      ranks, options_for(executor, ranks),
      [&path](const ModelRunOptions& o) { return open_llama(path, o); });
}

// What every TP test checks against one rank: identical greedy tokens, logits within the bound
// (one rank: bitwise).
void expect_like_one_rank(LanguageModel& tp, LanguageModel& one, const std::vector<int32_t>& tokens,
                          int steps, int ranks, const std::string& what) {
  const Greedy expected = greedy(one, tokens, steps);
  const Greedy got = greedy(tp, tokens, steps);
  EXPECT_EQ(got.tokens, expected.tokens) << what;
  const double prompt_gap = relative_gap(got.prompt_logits, expected.prompt_logits);
  const double step_gap = relative_gap(got.step_logits, expected.step_logits);
  std::printf("%s: relative logit gap prompt %.3g, steps %.3g\n", what.c_str(), prompt_gap,
              step_gap);
  if (ranks == 1) {
    EXPECT_TRUE(bitwise_equal(got.prompt_logits, expected.prompt_logits)) << what;
    EXPECT_TRUE(bitwise_equal(got.step_logits, expected.step_logits)) << what;
  }
  EXPECT_LE(prompt_gap, kRelativeBound) << what;
  EXPECT_LE(step_gap, kRelativeBound) << what;
}

class LlamaTensorParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(tiny_llama())) {
      GTEST_SKIP() << tiny_llama() << " is absent";
    }
  }
};

TEST_F(LlamaTensorParallelTest, RanksOneTwoFourMatchOneRankOnBothExecutors) {
  for (ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    auto one = open_llama(tiny_llama(), options_for(executor, 1));
    const std::vector<int32_t> tokens = prompt(23, one->vocab_size(), 1);
    for (int ranks : {1, 2, 4}) {
      auto tp = tensor_parallel(tiny_llama(), ranks, executor);
      expect_like_one_rank(
          *tp, *one, tokens, 12, ranks,
          fmt::format("tiny-llama, {} ranks, {}", ranks, program::executor_name(executor)));
      // The step's own argmax, reduced across the ranks, picks the one-rank token (global ids).
      EXPECT_EQ(dynamic_cast<LlamaGgufModel&>(tp->rank(0)).last_greedy(),
                dynamic_cast<LlamaGgufModel&>(*one).last_greedy());
    }
  }
}

// Each rank holds its share: fewer weight bytes per step than the whole model, and its own KV
// heads only.
TEST_F(LlamaTensorParallelTest, RanksHoldTheirShare) {
  auto one = open_llama(tiny_llama(), options_for(ExecutorKind::kMega, 1));
  auto tp = tensor_parallel(tiny_llama(), 2, ExecutorKind::kMega);
  for (int r = 0; r < 2; ++r) {
    auto& rank = dynamic_cast<LlamaGgufModel&>(tp->rank(r));
    EXPECT_TRUE(rank.tensor_parallel());
    EXPECT_LT(rank.decode_weight_bytes(), one->decode_weight_bytes());
    EXPECT_EQ(rank.rank_config().num_key_value_heads, 1);
    EXPECT_EQ(rank.rank_config().num_attention_heads, 2);
    EXPECT_EQ(rank.rank_config().intermediate_size, 64);
    EXPECT_EQ(rank.state_bytes_per_token() * 2, one->state_bytes_per_token());
  }
  EXPECT_EQ(tp->state_bytes_per_token(), one->state_bytes_per_token());
}

// Under TP too, a prompt's prefill programs give bitwise what decoding its tokens one by one
// gives, and a batch step gives each sequence bitwise what it gets alone.
TEST_F(LlamaTensorParallelTest, PrefillEqualsDecodeAndBatchesEqualSingles) {
  auto tp = tensor_parallel(tiny_llama(), 2, ExecutorKind::kMega);
  const int64_t vocab = tp->vocab_size();
  const std::vector<int32_t> tokens = prompt(20, vocab, 3);
  auto prefilled = tp->new_sequence(kContext);
  std::vector<float> all;
  tp->forward(*prefilled, tokens, LogitRows::kAll, all);
  auto stepped = tp->new_sequence(kContext);
  std::vector<float> logits;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    SequenceState* states[] = {stepped.get()};
    tp->decode(states, std::span(tokens).subspan(i, 1), logits);
    const std::vector<float> row(all.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                 all.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    ASSERT_TRUE(bitwise_equal(logits, row)) << "position " << i;
  }
  // Three sequences in one step against each alone.
  std::vector<std::unique_ptr<SequenceState>> batch;
  std::vector<std::vector<float>> alone;
  for (int s = 0; s < 3; ++s) {
    batch.push_back(tp->new_sequence(kContext));
    std::vector<float> ignored;
    tp->forward(*batch.back(), prompt(5 + s, vocab, 10 + s), LogitRows::kLast, ignored);
    auto single = tp->new_sequence(kContext);
    tp->forward(*single, prompt(5 + s, vocab, 10 + s), LogitRows::kLast, ignored);
    SequenceState* states[] = {single.get()};
    tp->decode(states, std::vector<int32_t>{static_cast<int32_t>(s + 7)}, logits);
    alone.push_back(logits);
  }
  SequenceState* states[] = {batch[0].get(), batch[1].get(), batch[2].get()};
  tp->decode(states, std::vector<int32_t>{7, 8, 9}, logits);
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> row(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);
    EXPECT_TRUE(bitwise_equal(row, alone[static_cast<std::size_t>(s)])) << "sequence " << s;
  }
}

using md::testing::FaultyCommunicator;

TEST_F(LlamaTensorParallelTest, NegativeControlADroppedAllReduceBreaksTheBound) {
  auto one = open_llama(tiny_llama(), options_for(ExecutorKind::kMega, 1));
  const double gap = md::testing::gap_with_a_dropped_all_reduce(
      *one, [](const ModelRunOptions& o) { return open_llama(tiny_llama(), o); },
      options_for(ExecutorKind::kMega, 2), prompt(23, one->vocab_size(), 1), kContext);
  std::printf("dropped all-reduce: relative logit gap %.3g\n", gap);
  EXPECT_GT(gap, 100 * kRelativeBound);
}

// A rank that fails in the middle of a step: every rank leaves its collectives (none hangs),
// the call fails naming that rank, and the ranks then go on as if nothing had happened.
TEST_F(LlamaTensorParallelTest, ARankFailingMidStepFailsTheCallAndTheRanksGoOn) {
  for (ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    std::vector<std::unique_ptr<FaultyCommunicator>> failing;
    TensorParallelModel tp(2, options_for(executor, 2), [&](const ModelRunOptions& o) {
      failing.push_back(std::make_unique<FaultyCommunicator>(
          *o.ranks, FaultyCommunicator::Fault::kFail, o.ranks->rank() == 1 ? 2 : -1));
      ModelRunOptions with = o;
      with.ranks = failing.back().get();
      return open_llama(tiny_llama(), with);
    });
    const std::vector<int32_t> tokens = prompt(9, 512, 6);
    auto broken = tp.new_sequence(kContext);
    std::vector<float> logits;
    try {
      tp.forward(*broken, tokens, LogitRows::kLast, logits);
      FAIL() << "rank 1 failed mid-step";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "rank 1 failed: injected failure");
    }
    auto healthy = tensor_parallel(tiny_llama(), 2, executor);
    expect_like_one_rank(tp, *healthy, tokens, 4, 1, "after a failed step");
  }
}

// A request every rank refuses is refused with the one-rank message, and the ranks go on; the
// reference executor is refused at load and by set_executor.
TEST_F(LlamaTensorParallelTest, RefusalsLeaveTheRanksWorking) {
  auto one = open_llama(tiny_llama(), options_for(ExecutorKind::kMega, 1));
  auto tp = tensor_parallel(tiny_llama(), 2, ExecutorKind::kMega);
  auto state = tp->new_sequence(8);
  std::vector<float> logits;
  try {
    tp->forward(*state, std::vector<int32_t>{1, 99999}, LogitRows::kLast, logits);
    FAIL() << "a token outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "token id 99999 is outside the vocabulary (0..511)");
  }
  EXPECT_THROW(tp->forward(*state, prompt(9, 512, 1), LogitRows::kLast, logits), Error);
  EXPECT_EQ(state->position(), 0);
  const std::vector<int32_t> tokens = prompt(7, 512, 2);
  expect_like_one_rank(*tp, *one, tokens, 4, 2, "after refusals");
  EXPECT_FALSE(tp->set_executor(ExecutorKind::kReference));
  try {
    tensor_parallel(tiny_llama(), 2, ExecutorKind::kReference);
    FAIL() << "the reference executor under tensor parallelism";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2 cannot load: tiny-llama: tensor "
                                         "parallelism runs the step programs"),
              std::string::npos)
        << e.what();
  }
}

// The real default model: 2 ranks (6 and 3 query heads) and 3 ranks (one KV head each) decode
// the same greedy tokens as one rank; 4 ranks cannot share its 3 KV heads and say so.
TEST(LlamaTensorParallelSmolLM2, TwoAndThreeRanksMatchOneRankFourAreRefused) {
  if (!fs::exists(smollm2())) {
    GTEST_SKIP() << smollm2() << " is absent: run scripts/setup";
  }
  auto one = open_llama(smollm2(), options_for(ExecutorKind::kMega, 2));
  const std::vector<int32_t> tokens = prompt(21, one->vocab_size(), 4);
  for (int ranks : {2, 3}) {
    auto tp = tensor_parallel(smollm2(), ranks, ExecutorKind::kMega);
    expect_like_one_rank(*tp, *one, tokens, 16, ranks,
                         fmt::format("SmolLM2 Q4_1, {} ranks", ranks));
  }
  try {
    tensor_parallel(smollm2(), 4, ExecutorKind::kMega);
    FAIL() << "4 ranks over 3 KV heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 ranks cannot share 3 KV heads"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace md
