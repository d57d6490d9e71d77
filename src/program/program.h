// The megakernel program: a decode step as a static, ordered list of plain-data instructions
// (instruction.h) over activation buffers, built once per (model, rows, row mode) and run for
// every step by an Executor (executor.h). Within an instruction, workers claim tasks dynamically
// (a descheduled worker leaves its share to the others); a task waits only for the producer tiles
// it reads, and while it waits its worker prefetches the task's weight bytes (weights never
// depend on activations), so the memory system does not idle. Results never depend on which
// worker ran a task: every task covers fixed output rows and the kernels reduce in a fixed order.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kernels/kv_cache.h"
#include "kernels/kv_ring.h"
#include "kernels/kv_rows.h"
#include "program/instruction.h"
#include "program/spin_budget.h"

namespace md::program {

// A delta-rule layer's state of one sequence: the conv history [conv channels][kernel - 1]
// (oldest first) and the f32 recurrent matrices [value heads][value dim][key dim].
struct RecurrentState {
  float* conv = nullptr;
  float* recurrent = nullptr;
};

// The state a step's rows read and extend, as the shared instructions see it.
class StepState {
 public:
  virtual ~StepState() = default;
  virtual kernels::KvCache& kv_cache(int64_t slot) = 0;
  // The delta-rule layer `slot`'s state; families without recurrent layers never get asked.
  virtual RecurrentState recurrent_state(int64_t slot);
  // A drafter's sliding-window ring of layer `layer` (window_attention).
  virtual kernels::KvRing kv_ring(int64_t layer);
  // Layer `layer`'s keys and values as position-indexed rows (row_attention).
  virtual kernels::KvRows& kv_rows(int64_t layer);
  // Verify rows: where the recurrent state of layer `slot` after `rows` rows of the block goes
  // (kda); families without verify snapshots in the state never get asked.
  virtual RecurrentState recurrent_snapshot(int64_t slot, int64_t rows);
  // An MLA layer's latent cache rows (latent_append, latent_attention).
  virtual LatentRows latent_rows(int64_t slot);
};

// One row of a step: its token, its position and the sequence it extends (verify rows share
// one sequence at consecutive positions).
struct StepRow {
  int32_t token = 0;
  int64_t position = 0;
  StepState* state = nullptr;
};

// What a task body sees: which worker runs it, the normalised input rows of a projection
// prologue and the worker's private scratch (scratch_floats, 64-byte aligned).
struct WorkerContext {
  int worker = 0;
  float* normalised = nullptr;
  float* scratch = nullptr;
  int spin_rounds = SpinBudget::kIdleRounds;  // before a wait sleeps (spin_budget.h)
};

// Time and tasks of one instruction on one worker, summed over the profiled steps.
struct InstructionProfile {
  uint64_t tasks = 0;
  uint64_t busy_ns = 0;
  uint64_t wait_ns = 0;
};

class Program {
 public:
  // `buffers[id]` is the storage of BufferId id. `scratch_floats` of private scratch per worker
  // (besides the normalised input rows, which the program sizes itself). `max_rows` bounds the
  // step rows and every count register. Throws md::Error for a malformed program: a dependency
  // that is not on an earlier instruction's tasks, a buffer id out of range, operand lists that do
  // not match the task count.
  Program(std::vector<Instruction> instructions, std::vector<float*> buffers, int workers,
          std::size_t scratch_floats, int64_t max_rows = kMaxStepRows);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  int workers() const { return workers_; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  float* buffer(BufferId id) const { return buffers_[static_cast<std::size_t>(id)]; }
  // Points a buffer at other storage (e.g. the caller's logits), between runs.
  void rebind(BufferId id, float* data);

  // The next run's rows (1..max_rows), between runs.
  void set_rows(std::span<const StepRow> rows);
  int64_t rows() const { return rows_; }
  int64_t max_rows() const { return max_rows_; }
  const StepRow& row(int64_t n) const { return step_rows_[static_cast<std::size_t>(n)]; }
  // Count register i (0..kCounts-1) of the next run (0..max_rows), between runs.
  static constexpr int kCounts = 2;
  void set_count(int i, int64_t rows);
  int64_t count(RowCount from) const {
    return from == kStepRows ? rows_ : counts_[static_cast<std::size_t>(from)];
  }
  // An input's first row this run (a negative first_row counts back from its count), and how many
  // rows it has: its count minus its first row.
  int64_t first_row(const RowInput& input) const {
    return resolved_first_row(input.first_row, count(input.rows_from));
  }
  int64_t input_rows(const RowInput& input) const {
    return count(input.rows_from) - first_row(input);
  }

  // Executors: begin_step() before the workers start (returns the step's number), then every
  // worker runs run_worker (fused) or, instruction by instruction with a barrier between them,
  // run_instruction (op by op). A fused worker waiting for a producer spins `spin_rounds` pause
  // rounds before it sleeps.
  uint64_t begin_step();
  void run_worker(int worker, uint64_t step, int spin_rounds);
  void run_instruction(int worker, int32_t index, uint64_t step);
  // A task that throws (a collective whose ranks were aborted) does not end its worker: the task
  // still counts as done, so the step completes and no waiting task hangs, and the first failure
  // is kept. Executors call this once every worker has returned: it throws the failure as
  // md::Error (and forgets it).
  void throw_if_failed();

  // Per-instruction, per-worker time and wait accounting (off by default: it reads the clock
  // around every task).
  void set_profiling(bool on);
  bool profiling() const { return profiling_; }
  void reset_profile();
  // [worker][instruction]
  const std::vector<std::vector<InstructionProfile>>& profile() const { return profile_; }
  uint64_t profiled_steps() const { return profiled_steps_; }

  // Instructions, opcodes, tasks, weight bytes and dependencies, one line each.
  std::string describe() const;

 private:
  struct alignas(64) Counter {
    std::atomic<uint64_t> value{0};
  };

  void validate() const;
  bool satisfied(const Dependency& dependency, uint64_t step) const;
  void wait_for(const Instruction& ins, int64_t task, uint64_t step, int spin_rounds);
  void complete(int32_t index, int64_t task, uint64_t step);
  void record_failure(const char* why);
  std::size_t claim_counters() const {
    return instructions_.size() * static_cast<std::size_t>(workers_);
  }

  std::vector<Instruction> instructions_;
  std::vector<float*> buffers_;
  int workers_;
  int64_t max_rows_;
  int64_t rows_ = 0;
  std::vector<StepRow> step_rows_;
  std::array<int64_t, kCounts> counts_{};

  std::vector<std::size_t> first_task_;              // index of instruction i's task 0 in stamps_
  std::unique_ptr<std::atomic<uint64_t>[]> stamps_;  // step in which each task last completed
  std::unique_ptr<Counter[]> done_;                  // tasks completed, over all steps
  // Tasks claimed in the current step, per [instruction][segment]: one segment per worker.
  std::unique_ptr<Counter[]> claims_;
  uint64_t steps_run_ = 0;
  std::atomic<bool> failed_{false};
  std::mutex failure_mutex_;
  std::string failure_;  // the step's first failure

  std::vector<std::unique_ptr<float[], void (*)(float*)>> scratch_;
  std::vector<WorkerContext> contexts_;

  bool profiling_ = false;
  uint64_t profiled_steps_ = 0;
  std::vector<std::vector<InstructionProfile>> profile_;
};

}  // namespace md::program
