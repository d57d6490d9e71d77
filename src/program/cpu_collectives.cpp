#include "program/cpu_collectives.h"

#include <algorithm>

#include "dist/communicator.h"
#include "dist/partition.h"

namespace md::program {

void run_all_reduce(const AllReduceOperands& op, const Program& program) {
  const int64_t n = program.rows() * op.width;
  float* partial = program.buffer(op.partial);
  op.comm->all_reduce_sum(partial, n);
  float* out = program.buffer(op.out);
  if (op.accumulate) {
    for (int64_t i = 0; i < n; ++i) out[i] += partial[i];
  } else {
    std::copy(partial, partial + n, out);
  }
  if (op.copy_to == kNoBuffer) return;
  float* copy = program.buffer(op.copy_to);
  for (int64_t row = 0; row < program.rows(); ++row) {
    std::copy(out + row * op.width, out + (row + 1) * op.width,
              copy + row * op.copy_stride + op.copy_offset);
  }
}

void reduce_vocab_shard(const ArgmaxOperands& op, const Program& program, int64_t rows) {
  const VocabShard& shard = op.shard;
  dist::Communicator& comm = *shard.comm;
  const int ranks = comm.size();
  const dist::Range mine = dist::even_part(shard.vocab, ranks, comm.rank());
  // Each rank's best (id, logit) per row, then the best of those: strict >, so the lower rank
  // (lower ids) keeps a tie, as one lm_head over the whole vocabulary would.
  kernels::Candidate* best = shard.best;
  kernels::Candidate* local = own_best(op);
  for (int64_t n = 0; n < rows; ++n) local[n].id += static_cast<int32_t>(mine.begin);
  comm.all_gather(local, static_cast<std::size_t>(rows) * sizeof(kernels::Candidate), best);
  for (int64_t n = 0; n < rows; ++n) {
    kernels::Candidate winner = best[n];
    for (int r = 1; r < ranks; ++r) {
      const kernels::Candidate& c = best[r * rows + n];
      if (c.logit > winner.logit) winner = c;
    }
    op.greedy[n] = winner.id;
  }
  if (shard.gathered == kNoBuffer) return;
  // Every rank's logits, [rows][its part] each, sent as rows · largest part floats (the parts
  // differ by at most one id), then laid out by id.
  const int64_t largest = dist::largest_part(shard.vocab, ranks);
  const auto floats = static_cast<std::size_t>(rows * largest);
  comm.all_gather(program.buffer(shard.local), floats * sizeof(float), shard.scratch);
  float* gathered = program.buffer(shard.gathered);
  for (int r = 0; r < ranks; ++r) {
    const dist::Range part = dist::even_part(shard.vocab, ranks, r);
    const float* from = shard.scratch + static_cast<std::size_t>(r) * floats;
    for (int64_t n = 0; n < rows; ++n) {
      std::copy(from + n * part.size(), from + (n + 1) * part.size(),
                gathered + n * shard.vocab + part.begin);
    }
  }
}

}  // namespace md::program
