#include "program/cpu_executor.h"

#include "base/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace md::program {

namespace {

// Spins this many rounds before sleeping: a decode loop's next step usually comes within
// microseconds, while an idle server must not burn CPU.
constexpr int kSpinRounds = 20000;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

CpuExecutor::CpuExecutor(int threads) : threads_(std::max(1, threads)) {
  for (int w = 1; w < threads_; ++w) team_.emplace_back([this, w] { worker_loop(w); });
}

CpuExecutor::~CpuExecutor() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& thread : team_) thread.join();
}

void CpuExecutor::run(Program& program) {
  if (program.workers() != threads_) {
    fail("program built for {} workers run on an executor of {}", program.workers(), threads_);
  }
  program_ = &program;
  step_ = program.begin_step();
  finished_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  program.run_worker(0, step_);
  int others = threads_ - 1;
  for (int spin = 0; finished_.load(std::memory_order_acquire) != others; ++spin) {
    if (spin < kSpinRounds) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void CpuExecutor::worker_loop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinRounds; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_) return;
    program_->run_worker(worker, step_);
    finished_.fetch_add(1, std::memory_order_release);
  }
}

}  // namespace md::program
