#include "program/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace md::program {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

float* allocate_scratch(std::size_t floats) {
  std::size_t bytes = std::max<std::size_t>(64, (floats * sizeof(float) + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void free_scratch(float* p) { std::free(p); }

}  // namespace

Program::Program(std::vector<Instruction> instructions, int workers, std::size_t scratch_floats)
    : instructions_(std::move(instructions)), workers_(std::max(1, workers)) {
  auto count = instructions_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const Instruction& ins = instructions_[i];
    if (ins.tasks < 1) fail("program instruction '{}' has no tasks", ins.name);
    for (int32_t dep : ins.depends_on) {
      if (dep < 0 || static_cast<std::size_t>(dep) >= i) {
        fail("program instruction '{}' depends on #{}, which does not come before it", ins.name, dep);
      }
    }
  }
  done_ = std::make_unique<Counter[]>(count);
  schedules_.resize(static_cast<std::size_t>(workers_));
  // Every worker takes an equal share of every instruction; the leftover tasks of an uneven
  // split go to the workers with the least work so far, so the step stays balanced overall.
  std::vector<double> load(static_cast<std::size_t>(workers_), 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    const Instruction& ins = instructions_[i];
    int64_t base = ins.tasks / workers_;
    int64_t extra = ins.tasks % workers_;
    std::vector<int> order(static_cast<std::size_t>(workers_));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return load[static_cast<std::size_t>(a)] < load[static_cast<std::size_t>(b)];
    });
    std::vector<int64_t> share(static_cast<std::size_t>(workers_), base);
    for (int64_t e = 0; e < extra; ++e) ++share[static_cast<std::size_t>(order[static_cast<std::size_t>(e)])];
    int64_t begin = 0;
    for (int w = 0; w < workers_; ++w) {
      int64_t n = share[static_cast<std::size_t>(w)];
      if (n > 0) {
        schedules_[static_cast<std::size_t>(w)].push_back({static_cast<int32_t>(i), begin, begin + n});
        load[static_cast<std::size_t>(w)] += static_cast<double>(n) * ins.cost_per_task;
      }
      begin += n;
    }
  }
  for (int w = 0; w < workers_; ++w) {
    scratch_.emplace_back(allocate_scratch(scratch_floats), free_scratch);
    contexts_.push_back({w, scratch_.back().get()});
  }
}

void Program::wait_for(int32_t instruction, uint64_t step) const {
  // Spin briefly (a producer in a small model is microseconds away), then sleep on the counter:
  // a spinning thread steals issue slots from a sibling hyperthread that is streaming weights.
  constexpr int kSpinRounds = 2000;
  for (int spin = 0; spin < kSpinRounds; ++spin) {
    if (is_done(instruction, step)) return;
    cpu_relax();
  }
  const auto& counter = done_[static_cast<std::size_t>(instruction)].value;
  uint64_t target = step * static_cast<uint64_t>(instructions_[static_cast<std::size_t>(instruction)].tasks);
  for (uint64_t seen = counter.load(std::memory_order_acquire); seen < target;
       seen = counter.load(std::memory_order_acquire)) {
    counter.wait(seen, std::memory_order_acquire);
  }
}

void Program::run_worker(int worker, uint64_t step) {
  WorkerContext& context = contexts_[static_cast<std::size_t>(worker)];
  for (const Assignment& a : schedules_[static_cast<std::size_t>(worker)]) {
    const Instruction& ins = instructions_[static_cast<std::size_t>(a.instruction)];
    for (int32_t dep : ins.depends_on) wait_for(dep, step);
    ins.body(a.begin, a.end, context);
    mark_done(a.instruction, a.end - a.begin);
  }
}

std::string Program::describe() const {
  std::string out = fmt::format("{} instructions, {} workers\n", instructions_.size(), workers_);
  for (const Instruction& ins : instructions_) {
    out += fmt::format("  {:<28} {:>6} tasks  cost {:.3g}\n", ins.name, ins.tasks,
                       ins.cost_per_task * static_cast<double>(ins.tasks));
  }
  return out;
}

}  // namespace md::program
