// Runs a Program with a persistent team of worker threads: a step is one wake-up, after which
// every worker walks the instructions from the first layer to the lm_head, claiming tasks and
// waiting only for the producer tiles each reads. Idle workers sleep on a futex (no CPU).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "program/executor.h"

namespace md::program {

class CpuExecutor final : public Executor {
 public:
  // `threads` workers in total; the calling thread is worker 0.
  explicit CpuExecutor(int threads);
  ~CpuExecutor();
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  ExecutorKind kind() const override { return ExecutorKind::kMega; }
  int threads() const override { return threads_; }
  void run(Program& program) override;

 private:
  void worker_loop(int worker);

  int threads_;
  std::vector<std::thread> team_;
  std::atomic<uint64_t> generation_{0};  // bumped to start a step (or to stop)
  std::atomic<int> finished_{0};         // workers done with the current step
  Program* program_ = nullptr;
  uint64_t step_ = 0;
  bool stopping_ = false;
};

}  // namespace md::program
