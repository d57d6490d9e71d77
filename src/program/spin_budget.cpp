#include "program/spin_budget.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace md::program {

namespace {

// /proc/thread-self/schedstat: "<ns on the CPU> <ns runnable but waiting for a CPU> <slices>".
// Opened once per thread and re-read with pread (about a microsecond).
class SchedStat {
 public:
  SchedStat() : fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
  ~SchedStat() {
    if (fd_ >= 0) close(fd_);
  }
  SchedStat(const SchedStat&) = delete;
  SchedStat& operator=(const SchedStat&) = delete;

  // Nanoseconds this thread has waited on a run queue, or -1 where the kernel does not say.
  int64_t run_delay_ns() const {
    char text[128];
    ssize_t n = fd_ < 0 ? -1 : pread(fd_, text, sizeof(text) - 1, 0);
    if (n <= 0) return -1;
    text[n] = '\0';
    char* end = nullptr;
    std::strtoull(text, &end, 10);
    char* after = nullptr;
    unsigned long long delay = std::strtoull(end, &after, 10);
    return after == end ? -1 : static_cast<int64_t>(delay);
  }

 private:
  int fd_;
};

}  // namespace

void SpinBudget::observe(int64_t run_delay_ns, int64_t wall_ns) {
  if (run_delay_ns < 0) return;
  if (last_delay_ns_ >= 0) {
    const int64_t waited = run_delay_ns - last_delay_ns_;
    const int64_t elapsed = wall_ns - last_wall_ns_;
    if (waited >= kPreemptedNs && waited * kPreemptedShare >= elapsed) {
      if (++preempted_in_a_row_ >= kPreemptedSteps) contended_steps_ = kContendedSteps;
    } else {
      preempted_in_a_row_ = 0;
      if (contended_steps_ > 0) --contended_steps_;
    }
  }
  last_delay_ns_ = run_delay_ns;
  last_wall_ns_ = wall_ns;
}

ThreadClock ThreadClock::now() {
  thread_local const SchedStat stat;
  const auto wall = std::chrono::steady_clock::now().time_since_epoch();
  return {stat.run_delay_ns(), std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()};
}

}  // namespace md::program
