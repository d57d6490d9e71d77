// What a tensor-parallel rank's step program holds beyond the whole model's (models/common/
// tensor_shard.h): the row-parallel products before their sum across the ranks, the partial mix of
// the routed experts it holds (expert parallelism), its part of the vocabulary's logits, and the
// gather's scratch and candidates (program::VocabShard). One rank (or none) needs none of them.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "dist/partition.h"
#include "program/instruction.h"

namespace md {

class RankBuffers {
 public:
  // Sized for steps of `rows` rows of `hidden` values, `logit_rows` rows of logits over `vocab`
  // ids and (latent MoE models: Muse Spark, Kimi K3) rows of `expert_width` mixed expert outputs;
  // nothing when `ranks` is null or one rank.
  RankBuffers(dist::Communicator* ranks, int64_t rows, int64_t hidden, int64_t logit_rows,
              int64_t vocab, int64_t expert_width = 0)
      : ranks_(dist::tensor_parallel(ranks) ? ranks : nullptr), vocab_(vocab) {
    if (ranks_ == nullptr) return;
    const int64_t part = dist::largest_part(vocab, ranks_->size());
    partial.assign(at(rows * hidden), 0.0f);
    expert_mix.assign(at(rows * expert_width), 0.0f);
    local_logits.assign(at(logit_rows * part), 0.0f);
    scratch_.assign(at(ranks_->size() * logit_rows * part), 0.0f);
    best_.assign(at((ranks_->size() + 1) * logit_rows), {});
  }

  // The communicator of a rank of more than one, else null.
  dist::Communicator* ranks() const { return ranks_; }

  // The lm_head's shard: the rank's logits in `local`, gathered into `gathered`; none for one
  // rank.
  program::VocabShard vocab_shard(program::BufferId local, program::BufferId gathered) {
    if (ranks_ == nullptr) return {};
    return {.comm = ranks_,
            .vocab = vocab_,
            .local = local,
            .gathered = gathered,
            .scratch = scratch_.data(),
            .best = best_.data()};
  }

  std::vector<float> partial;       // [rows][hidden]
  std::vector<float> expert_mix;    // [rows][expert width]
  std::vector<float> local_logits;  // [logit rows][largest vocabulary part]

 private:
  static std::size_t at(int64_t n) { return static_cast<std::size_t>(n); }

  dist::Communicator* ranks_;
  int64_t vocab_;
  std::vector<float> scratch_;
  std::vector<kernels::Candidate> best_;
};

}  // namespace md
