// Runs a Program with a persistent team of worker threads: a step is one wake-up, after which
// every worker walks the instructions from the first layer to the lm_head, claiming tasks and
// waiting only for the producer tiles each reads. Idle workers sleep on a futex (no CPU).
//
// On a shared machine a worker the scheduler keeps preempting would hold its claimed task for a
// time slice while the others wait for it; such a worker sits out the step while another worker
// is not contended (spin_budget.h). Which worker runs a task never changes a result.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "program/executor.h"
#include "program/spin_budget.h"

namespace md::program {

class CpuExecutor final : public Executor {
 public:
  // Where each worker's run-queue time comes from (ThreadClock::now in production, a scripted
  // source in tests); called on the worker's own thread once per step.
  using ClockSource = ThreadClock (*)(int worker);

  // `threads` workers in total; the calling thread is worker 0.
  explicit CpuExecutor(int threads, ClockSource clock = nullptr);
  ~CpuExecutor();
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  ExecutorKind kind() const override { return ExecutorKind::kMega; }
  int threads() const override { return threads_; }
  void run(Program& program) override;

  // Whether worker w took part in the last step (all do unless some were contended).
  bool took_part(int worker) const;

 private:
  struct alignas(64) Worker {
    // Written by the worker's own thread during a step, read by worker 0 between steps: the
    // finished_ count (release/acquire) orders the two.
    SpinBudget budget;
    std::atomic<bool> takes_part{true};  // decided by worker 0 before the step starts
  };

  void worker_loop(int worker);
  void observe(int worker);
  void choose_workers();

  int threads_;
  ClockSource clock_;
  std::unique_ptr<Worker[]> workers_;
  std::vector<std::thread> team_;
  std::atomic<uint64_t> generation_{0};  // bumped to start a step (or to stop)
  std::atomic<int> finished_{0};         // workers done with the current step
  Program* program_ = nullptr;
  uint64_t step_ = 0;
  bool stopping_ = false;
};

}  // namespace md::program
