// The CPU meaning of the collective instructions (tensor parallelism, instruction.h): kAllReduce,
// and the cross-rank half of kArgmax over a vocabulary shard. Each is one task, run by whichever
// worker claims it; it blocks in the communicator until every rank has called the same
// collective (dist/communicator.h), while the rank's other workers go on with other tasks.
#pragma once

#include "dist/communicator.h"
#include "program/program.h"

namespace md::program {

// The step rows' partial products summed across the ranks (rank order), added into `out`.
void run_all_reduce(const AllReduceOperands& op, const Program& program);

// Where the rank's own argmax leaves each row's best (id within its shard, logit): after the
// ranks' bests in op.shard.best.
inline kernels::Candidate* own_best(const ArgmaxOperands& op) {
  return op.shard.best + static_cast<std::ptrdiff_t>(op.shard.comm->size()) * op.row_capacity;
}

// After the rank's own argmax of its `rows` rows (own_best): each row's best across the ranks
// into greedy (global ids), then the logits gathered when asked.
void reduce_vocab_shard(const ArgmaxOperands& op, const Program& program, int64_t rows);

}  // namespace md::program
