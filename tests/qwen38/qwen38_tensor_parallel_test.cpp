// Qwen3.8 / Qwen3.5 under tensor parallelism, ranks as threads of this process
// (TensorParallelModel), against the same model on one rank, on every fixture whose heads can be
// shared (Qwen3.5-MoE's routed experts dealt to the ranks, its shared expert's columns shared:
// the experts the ranks ran in a step add up to one rank's) — transformers' layout (grouped value
// heads) and
// llama.cpp's GGUF (tiled value heads; BF16 and Q8_0 blocks): greedy tokens identical, logits
// within the bound the changed summation order allows (as llama_tensor_parallel_test.cpp argues:
// the Gated DeltaNet and attention heads are computed whole on their rank, only the o / out_proj /
// down sums and the experts' sum change order), verify rows and commit(k) likewise, and, with the
// recurrent delta rule, a prompt's prefill programs bitwise the same tokens decoded one by one.
// More ranks than key heads are refused with a message; a dropped all-reduce (an out_proj's, or
// a MoE block's) breaks the bound.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/tensor_parallel_support.h"
#include "base/error.h"
#include "dist/in_process_group.h"
#include "models/qwen38/qwen38_gguf_model.h"
#include "models/qwen38/qwen38_testing.h"
#include "models/rank_stream.h"
#include "models/tensor_parallel_model.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

constexpr double kRelativeBound = 5e-5;
constexpr int64_t kContext = 96;

std::vector<int32_t> prompt_of(int64_t length, int seed) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) {
    ids.push_back(static_cast<int32_t>((i * 211 + seed * 31 + 5) % 500));
  }
  return ids;
}

using md::testing::relative_gap;

using Loader = TensorParallelModel::Loader;

Loader hf(const std::string& fixture, bool chunked = true) {
  return [fixture, chunked](const ModelRunOptions& run) -> std::unique_ptr<LanguageModel> {
    Qwen38Options options;
    options.chunked_delta_rule = chunked;
    return std::make_unique<Qwen38Model>(qwen38_fixture_dir(fixture), run, options);
  };
}

Loader gguf(const std::string& file) {
  return [file](const ModelRunOptions& run) -> std::unique_ptr<LanguageModel> {
    return load_qwen38_gguf(
        std::make_shared<const GgufFile>(std::string(MD_GOLDEN_DIR) + "/qwen35-gguf/" + file), run);
  };
}

using md::testing::options_for;

using md::testing::Session;

Session session(LanguageModel& model, const std::vector<int32_t>& prompt) {
  return md::testing::session(model, prompt, kContext, 6, 4);
}

void expect_like_one_rank(const Loader& load, int ranks, ExecutorKind executor,
                          const std::string& what) {
  const std::unique_ptr<LanguageModel> one = load(options_for(executor, 2));
  TensorParallelModel tp(ranks, options_for(executor, ranks), load);
  const std::vector<int32_t> prompt = prompt_of(21, 3);
  one->set_tap_layers({0, 1});
  tp.set_tap_layers({0, 1});
  const Session expected = session(*one, prompt);
  const Session got = session(tp, prompt);
  EXPECT_EQ(got.tokens, expected.tokens) << what;
  // The step's own argmax, reduced across the ranks, and the drafter taps after the sums.
  EXPECT_EQ(dynamic_cast<Qwen38Model&>(tp.rank(0)).last_greedy(),
            dynamic_cast<Qwen38Model&>(*one).last_greedy())
      << what;
  EXPECT_EQ(got.taps.size(),
            2u * static_cast<std::size_t>(dynamic_cast<Qwen38Model&>(*one).config().hidden_size))
      << what;
  EXPECT_LE(relative_gap(got.taps, expected.taps), kRelativeBound) << what;
  const double gap = relative_gap(got.logits, expected.logits);
  std::printf("%s: relative logit gap %.3g\n", what.c_str(), gap);
  EXPECT_LE(gap, kRelativeBound) << what;
  if (ranks == 1) {
    EXPECT_TRUE(same_bits(got.logits, expected.logits)) << what;
  }
}

// The dense fixtures and the rank counts their heads allow (key heads, KV-head replication).
struct Case {
  std::string fixture;
  std::vector<int> ranks;
};

TEST(Qwen38TensorParallel, DenseFixturesMatchOneRank) {
  const std::vector<Case> cases = {{"tiny-qwen38", {1, 2}},       {"tiny-qwen38-text", {2}},
                                   {"tiny-qwen38-hd256", {2}},    {"tiny-qwen35-tied", {2, 4}},
                                   {"tiny-qwen35-interval", {2}}, {"tiny-qwen35-gelu-bias", {2}},
                                   {"tiny-qwen35-moe", {2}}};
  for (const Case& c : cases) {
    for (int ranks : c.ranks) {
      for (ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
        expect_like_one_rank(
            hf(c.fixture), ranks, executor,
            fmt::format("{}, {} ranks, {}", c.fixture, ranks, program::executor_name(executor)));
      }
    }
  }
}

// llama.cpp's layout: value heads tiled over the key heads, BF16 and Q8_0 blocks (Q8_0's o and
// down sliced as views into the mapping).
TEST(Qwen38TensorParallel, GgufFilesMatchOneRank) {
  for (const std::string file :
       {"tiny-qwen38.BF16.gguf", "tiny-qwen35-interval.BF16.gguf", "tiny-qwen35-tied.Q8_0.gguf",
        "tiny-qwen35-moe.BF16-fused-experts.gguf"}) {
    expect_like_one_rank(gguf(file), 2, ExecutorKind::kMega, file + ", 2 ranks");
  }
}

// With the recurrent delta rule a prompt's prefill programs give bitwise what decoding its tokens
// one by one gives, on two ranks as on one.
TEST(Qwen38TensorParallel, PrefillEqualsDecodeBitwise) {
  TensorParallelModel tp(2, options_for(ExecutorKind::kMega, 2), hf("tiny-qwen38", false));
  const int64_t vocab = tp.vocab_size();
  const std::vector<int32_t> prompt = prompt_of(20, 5);
  auto prefilled = tp.new_sequence(kContext);
  std::vector<float> all, logits;
  tp.forward(*prefilled, prompt, LogitRows::kAll, all);
  auto stepped = tp.new_sequence(kContext);
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    SequenceState* states[] = {stepped.get()};
    tp.decode(states, std::span(prompt).subspan(i, 1), logits);
    const std::vector<float> row(all.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                 all.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    ASSERT_TRUE(same_bits(logits, row)) << "position " << i;
  }
}

TEST(Qwen38TensorParallel, NegativeControlADroppedAllReduceBreaksTheBound) {
  const std::unique_ptr<LanguageModel> one = hf("tiny-qwen38")(options_for(ExecutorKind::kMega, 2));
  const double gap = md::testing::gap_with_a_dropped_all_reduce(
      *one, hf("tiny-qwen38"), options_for(ExecutorKind::kMega, 2), prompt_of(21, 3), kContext);
  std::printf("dropped all-reduce: relative logit gap %.3g\n", gap);
  EXPECT_GT(gap, 100 * kRelativeBound);
  // Layer 0's MoE block (its DeltaNet's out_proj sum comes first).
  const std::unique_ptr<LanguageModel> moe =
      hf("tiny-qwen35-moe")(options_for(ExecutorKind::kMega, 2));
  const double moe_gap = md::testing::gap_with_a_dropped_all_reduce(
      *moe, hf("tiny-qwen35-moe"), options_for(ExecutorKind::kMega, 2), prompt_of(21, 3), kContext,
      /*at=*/1);
  std::printf("dropped MoE all-reduce: relative logit gap %.3g\n", moe_gap);
  EXPECT_GT(moe_gap, 100 * kRelativeBound);
}

TEST(Qwen38TensorParallel, TheRanksShareTheRoutedExperts) {
  md::testing::expect_the_ranks_share_the_experts<Qwen38Model>(hf("tiny-qwen35-moe"), kContext);
}

// The step stream MPI ranks follow (models/rank_stream.h), over in-process ranks: rank 0 drives,
// rank 1 follows on its own thread; verify rows, commits and taps included, bitwise what
// TensorParallelModel over the same ranks gives.
TEST(Qwen38TensorParallel, RankStreamMatchesInProcessRanksBitwise) {
  const std::vector<int32_t> prompt = prompt_of(21, 3);
  Session expected;
  {
    TensorParallelModel tp(2, options_for(ExecutorKind::kMega, 2), hf("tiny-qwen38"));
    tp.set_tap_layers({0, 7});
    expected = session(tp, prompt);
  }
  dist::InProcessGroup group(2);
  std::string follower_error;
  std::thread follower([&] {
    try {
      ModelRunOptions run = options_for(ExecutorKind::kMega, 1);
      run.ranks = &group.rank(1);
      std::unique_ptr<LanguageModel> shard = hf("tiny-qwen38")(run);
      follow_rank_stream(*shard, group.rank(1));
    } catch (const std::exception& e) {
      follower_error = e.what();
    }
  });
  Session got;
  std::vector<float> taps;
  {
    ModelRunOptions run = options_for(ExecutorKind::kMega, 1);
    run.ranks = &group.rank(0);
    RankStreamModel stream(hf("tiny-qwen38")(run), group.rank(0));
    stream.set_tap_layers({0, 7});
    got = session(stream, prompt);
    taps = stream.last_taps();
  }
  follower.join();
  EXPECT_EQ(follower_error, "");
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_TRUE(same_bits(got.logits, expected.logits));
  EXPECT_EQ(taps.size(), 2u * 128u);  // the last step's row, two tapped layers
  EXPECT_TRUE(same_bits(taps, expected.taps));
}

void expect_refused(const Loader& load, int ranks, const std::string& message) {
  try {
    TensorParallelModel tp(ranks, options_for(ExecutorKind::kMega, ranks), load);
    FAIL() << "expected: " << message;
  } catch (const md::Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(Qwen38TensorParallel, RefusesWhatItCannotShare) {
  expect_refused(hf("tiny-qwen35-layers"), 2, "2 ranks cannot share 1 Gated DeltaNet key heads");
  // Value heads of 16 columns cannot be cut out of Q8_0's blocks of 32 (real checkpoints' are 128).
  expect_refused(gguf("tiny-qwen38.Q8_0.gguf"), 2,
                 "out_proj: columns 0..16 of a Q8_0 matrix of 96 columns (blocks of 32)");
  // A shard runs the step programs: not the reference, nor the reference's test ablations.
  try {
    TensorParallelModel tp(2, options_for(ExecutorKind::kReference, 2), hf("tiny-qwen38"));
    ADD_FAILURE() << "the reference executor under tensor parallelism";
  } catch (const md::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny-qwen38: tensor parallelism runs the step "
                                         "programs (executor mega or ops), not the reference"),
              std::string::npos)
        << e.what();
  }
  expect_refused(
      [](const ModelRunOptions& run) -> std::unique_ptr<LanguageModel> {
        Qwen38Options options;
        options.ablation = md::testing::Qwen38Ablation::kSiluWhateverHiddenAct;
        return std::make_unique<Qwen38Model>(qwen38_fixture_dir("tiny-qwen38"), run, options);
      },
      2, "tiny-qwen38: tensor parallelism runs the step programs, not the reference forward's");
  TensorParallelModel tp(2, options_for(ExecutorKind::kMega, 2), hf("tiny-qwen38"));
  EXPECT_FALSE(tp.set_executor(ExecutorKind::kReference));
  // A drafter borrows the whole lm_head, not rank 0's part of the vocabulary.
  EXPECT_EQ(tp.target_view().lm_head.rows, 512);
  EXPECT_EQ(tp.target_view().vocab_size, 512);
}

}  // namespace
}  // namespace md::test
