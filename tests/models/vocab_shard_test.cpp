// A vocabulary-parallel lm_head (program::VocabShard, StepBuilder::lm_head_argmax): each rank's
// part of a vocabulary that does not divide evenly (37 ids over 2 and 3 ranks), its per-tile
// argmax reduced across the ranks and its logits gathered, against one lm_head over the whole
// vocabulary: the greedy ids (global ids, so a wrong offset shows) and every gathered logit
// bitwise, and a tie between ranks goes to the lower id as one lm_head breaks it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "dist/in_process_group.h"
#include "dist/partition.h"
#include "kernels/weight_matrix.h"
#include "models/common/rank_buffers.h"
#include "models/common/step_builder.h"
#include "program/executor.h"

namespace md {
namespace {

constexpr int64_t kVocab = 37, kHidden = 16, kRows = 3;

// The lm_head over rows [part) of `weights` ([kVocab][kHidden] bf16) for kRows input rows:
// greedy ids and logits ([kRows][vocab], gathered across `ranks` when given).
struct Head {
  Head(const std::vector<uint16_t>& weights, dist::Range part, dist::Communicator* ranks)
      : x(kRows * kHidden), logits(kRows * kVocab), rank(ranks, kRows, kHidden, kRows, kVocab) {
    const kernels::Bf16Matrix w{weights.data() + part.begin * kHidden, part.size(), kHidden};
    StepBuilder b(1);
    const program::BufferId in = b.buffer(x), out = b.buffer(logits);
    const program::BufferId local = b.buffer(rank.local_logits);
    greedy.assign(kRows, -1);
    b.lm_head_argmax(StepBuilder::rows(in, kHidden), kernels::WeightMatrix::of(w),
                     ranks == nullptr ? out : local, 4, tile_max, tile_arg, greedy.data(), {}, {},
                     kRows, rank.vocab_shard(local, out));
    program = b.build(0, kRows);
  }
  void run() {
    std::vector<program::StepRow> rows(kRows);
    program->set_rows(rows);
    executor->run(*program);
  }

  std::vector<float> x, logits, tile_max;
  std::vector<int32_t> tile_arg, greedy;
  RankBuffers rank;
  std::unique_ptr<program::Program> program;
  std::unique_ptr<program::Executor> executor =
      program::make_executor(program::ExecutorKind::kMega, 1);
};

std::vector<uint16_t> random_weights(std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> w(kVocab * kHidden);
  for (uint16_t& v : w) v = f32_to_bf16(normal(rng));
  return w;
}

void expect_like_one_head(const std::vector<uint16_t>& weights, const std::vector<float>& x,
                          int ranks) {
  Head whole(weights, {0, kVocab}, nullptr);
  whole.x = x;
  whole.run();
  dist::InProcessGroup group(ranks);
  std::vector<std::unique_ptr<Head>> heads;
  for (int r = 0; r < ranks; ++r) {
    heads.push_back(
        std::make_unique<Head>(weights, dist::even_part(kVocab, ranks, r), &group.rank(r)));
    heads.back()->x = x;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { heads[r]->run(); });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(heads[r]->greedy, whole.greedy) << ranks << " ranks, rank " << r;
    EXPECT_EQ(std::memcmp(heads[r]->logits.data(), whole.logits.data(),
                          whole.logits.size() * sizeof(float)),
              0)
        << ranks << " ranks, rank " << r;
  }
}

TEST(VocabShard, UnevenPartsGiveOneHeadsGreedyIdsAndLogits) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 5; ++trial) {
    const std::vector<uint16_t> weights = random_weights(rng);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(kRows * kHidden);
    for (float& v : x) v = normal(rng);
    for (int ranks : {2, 3}) expect_like_one_head(weights, x, ranks);
  }
}

TEST(VocabShard, ATieAcrossRanksGoesToTheLowerId) {
  // Rows 5 (rank 0's part) and 30 (the last rank's) are the same and the largest for every input.
  std::vector<uint16_t> weights(kVocab * kHidden, f32_to_bf16(0.01f));
  for (int64_t c = 0; c < kHidden; ++c) {
    weights[5 * kHidden + c] = weights[30 * kHidden + c] = f32_to_bf16(1.0f);
  }
  const std::vector<float> x(kRows * kHidden, 1.0f);
  for (int ranks : {2, 3}) {
    expect_like_one_head(weights, x, ranks);
    Head whole(weights, {0, kVocab}, nullptr);
    whole.x = x;
    whole.run();
    EXPECT_EQ(whole.greedy, std::vector<int32_t>(kRows, 5));
  }
}

}  // namespace
}  // namespace md
