// The op-by-op baseline: runs a Program's instructions one at a time, each spread over the
// workers and followed by a barrier, as a conventional engine dispatches operations. Same tasks,
// same arithmetic, so its results are bitwise those of the CpuExecutor; it exists to measure
// what fusion buys and to localise bugs.
#pragma once

#include "base/thread_pool.h"
#include "program/executor.h"

namespace md::program {

class OpExecutor final : public Executor {
 public:
  explicit OpExecutor(int threads) : pool_(threads) {}
  ExecutorKind kind() const override { return ExecutorKind::kOps; }
  int threads() const override { return pool_.size(); }
  void run(Program& program) override;

 private:
  ThreadPool pool_;
};

}  // namespace md::program
