#include "program/cpu_executor.h"

#include <algorithm>
#include <span>

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace md::program {

namespace {

// Waiting for the next step spins this many times the worker's budget before sleeping: a decode
// loop's next step usually comes within microseconds, while an idle server must not burn CPU.
constexpr int kStepSpinFactor = 5;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

ThreadClock read_thread_clock(int) {
  return ThreadClock::now();
}

}  // namespace

CpuExecutor::CpuExecutor(int threads, ClockSource clock)
    : threads_(std::max(1, threads)),
      clock_(clock != nullptr ? clock : read_thread_clock),
      workers_(std::make_unique<Worker[]>(static_cast<std::size_t>(threads_))) {
  for (int w = 1; w < threads_; ++w) team_.emplace_back([this, w] { worker_loop(w); });
}

CpuExecutor::~CpuExecutor() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& thread : team_) thread.join();
}

bool CpuExecutor::took_part(int worker) const {
  return workers_[static_cast<std::size_t>(worker)].takes_part.load(std::memory_order_relaxed);
}

void CpuExecutor::observe(int worker) {
  const ThreadClock clock = clock_(worker);
  workers_[static_cast<std::size_t>(worker)].budget.observe(clock.run_delay_ns, clock.wall_ns);
}

// Contended workers sit the step out while at least one worker is not contended. When all are
// (with one busy process on one of two cores, the scheduler shares both cores among all three
// threads, so both workers are preempted), the first half of the team runs the step: fewer
// runnable threads than cores lets them keep theirs. Workers that sit out keep observing, become
// calm after SpinBudget::kContendedSteps steps and are tried again, so the team grows back when
// the other process stops. Decided from what each worker observed at its last step, before the
// step is released to them.
void CpuExecutor::choose_workers() {
  const std::span<Worker> team(workers_.get(), static_cast<std::size_t>(threads_));
  const bool any_calm =
      std::any_of(team.begin(), team.end(), [](const Worker& w) { return !w.budget.contended(); });
  const int half = (threads_ + 1) / 2;
  for (int w = 0; w < threads_; ++w) {
    Worker& worker = team[static_cast<std::size_t>(w)];
    worker.takes_part.store(any_calm ? !worker.budget.contended() : w < half,
                            std::memory_order_relaxed);
  }
}

void CpuExecutor::run(Program& program) {
  if (program.workers() != threads_) {
    fail("program built for {} workers run on an executor of {}", program.workers(), threads_);
  }
  observe(0);
  choose_workers();
  program_ = &program;
  step_ = program.begin_step();
  finished_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  Worker& self = workers_[0];
  if (self.takes_part.load(std::memory_order_relaxed)) {
    program.run_worker(0, step_, self.budget.rounds());
  }
  // Every task was claimed by a worker that takes part; wait for them to return.
  const int others = threads_ - 1;
  int done = finished_.load(std::memory_order_acquire);
  for (int spin = 0; done != others && spin < self.budget.rounds(); ++spin) {
    cpu_relax();
    done = finished_.load(std::memory_order_acquire);
  }
  while (done != others) {
    finished_.wait(done, std::memory_order_acquire);
    done = finished_.load(std::memory_order_acquire);
  }
  program.throw_if_failed();
}

void CpuExecutor::worker_loop(int worker) {
  Worker& self = workers_[static_cast<std::size_t>(worker)];
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    const int rounds = kStepSpinFactor * self.budget.rounds();
    for (int spin = 0; now == seen && spin < rounds; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_) return;
    observe(worker);
    if (self.takes_part.load(std::memory_order_relaxed)) {
      program_->run_worker(worker, step_, self.budget.rounds());
    }
    finished_.fetch_add(1, std::memory_order_release);
    finished_.notify_one();  // cheap unless worker 0 went to sleep on it
  }
}

}  // namespace md::program
