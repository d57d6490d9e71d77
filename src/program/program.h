// The megakernel IR: a decode step as a static, ordered list of fused instructions, each split
// into tasks that were assigned to workers when the program was built. Dependencies are
// per-instruction completion counters, so a worker waits only for the instructions whose outputs
// it reads, never at a global barrier. A program is built once per (model, rows, row mode) and
// run for every step; the executors (cpu_executor.h, op_executor.h) only interpret it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace md::program {

// What a task body sees: which worker runs it and that worker's private scratch.
struct WorkerContext {
  int worker = 0;
  float* scratch = nullptr;  // scratch_floats per worker, 64-byte aligned
};

// Runs tasks [begin, end) of one instruction; an instruction's tasks are independent of each
// other. Bodies may do a per-range prologue once (e.g. normalise the input rows into scratch).
using TaskBody = std::function<void(int64_t begin, int64_t end, WorkerContext& context)>;

struct Instruction {
  std::string name;
  int64_t tasks = 1;
  double cost_per_task = 1;        // bytes moved + flops, for balancing
  std::vector<int32_t> depends_on;  // earlier instructions whose every task must be done
  TaskBody body;
};

// A contiguous run of one instruction's tasks owned by one worker.
struct Assignment {
  int32_t instruction = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

class Program {
 public:
  // Builds the schedule for `workers` workers (>= 1) and `scratch_floats` of scratch each.
  Program(std::vector<Instruction> instructions, int workers, std::size_t scratch_floats);

  int workers() const { return workers_; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  // In program order: every worker visits instructions in the order they were added.
  const std::vector<Assignment>& schedule(int worker) const {
    return schedules_[static_cast<std::size_t>(worker)];
  }
  WorkerContext& context(int worker) { return contexts_[static_cast<std::size_t>(worker)]; }

  // Completion counters. They only grow: step s is complete for instruction i when
  // done(i) == s × tasks(i), so nothing is reset between steps.
  void mark_done(int32_t instruction, int64_t tasks) {
    auto& counter = done_[static_cast<std::size_t>(instruction)].value;
    counter.fetch_add(static_cast<uint64_t>(tasks), std::memory_order_release);
    counter.notify_all();  // cheap unless a worker went to sleep on it
  }
  bool is_done(int32_t instruction, uint64_t step) const {
    const Instruction& ins = instructions_[static_cast<std::size_t>(instruction)];
    return done_[static_cast<std::size_t>(instruction)].value.load(std::memory_order_acquire) >=
           step * static_cast<uint64_t>(ins.tasks);
  }
  // Runs every task of one worker's schedule for `step` (1-based), waiting on dependencies.
  void run_worker(int worker, uint64_t step);

  std::string describe() const;  // instructions, tasks and per-worker cost, for --verbose

  uint64_t steps_run = 0;  // steps started by an executor; the counters' target multiplier

 private:
  struct alignas(64) Counter {
    std::atomic<uint64_t> value{0};
  };
  void wait_for(int32_t instruction, uint64_t step) const;

  std::vector<Instruction> instructions_;
  int workers_;
  std::vector<std::vector<Assignment>> schedules_;
  std::unique_ptr<Counter[]> done_;
  std::vector<std::unique_ptr<float[], void (*)(float*)>> scratch_;
  std::vector<WorkerContext> contexts_;
};

}  // namespace md::program
