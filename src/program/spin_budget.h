// Whether a worker thread has been kept off the CPU lately, and what follows from it: how long it
// spins before sleeping, and whether it takes part in the next step at all.
//
// Spinning is what makes a fused step fast on an idle machine: a producer tile is microseconds
// away, and a futex sleep and wake-up costs about as much. On a machine shared with another busy
// process it is what makes it slow: a spinning waiter uses up the CPU share the scheduler would
// otherwise give it the moment its producer finishes. Worse, a preempted worker holds the task it
// claimed for a whole time slice (milliseconds), and every task that reads that tile waits with
// it — the op-by-op executor loses less, because its pool threads arrive late at each
// instruction and the running thread has claimed the work by then.
//
// Linux counts, per thread, the time spent runnable but waiting for a CPU
// (/proc/thread-self/schedstat). A worker that waited for a CPU for an eighth or more of the
// time since its last step (and at least 200 µs), three steps in a row, counts as contended: it
// spins only briefly before sleeping, and the executor leaves it out of the next steps
// (cpu_executor.h). An idle machine has such steps too, but alone: a kernel thread or another
// process that runs for a few milliseconds (seen: 2–10 ms every second or so on the test VM) must
// not cost the next sixteen steps a worker.
#pragma once

#include <cstdint>

namespace md::program {

class SpinBudget {
 public:
  // Pause rounds a waiting worker spins on an idle machine, and after a recent preemption.
  static constexpr int kIdleRounds = 4000;
  static constexpr int kContendedRounds = 100;
  // A preemption: run-queue wait of at least 1/kPreemptedShare of the wall time between two
  // observations, and at least kPreemptedNs. kPreemptedSteps of them in a row make the worker
  // contended for the next kContendedSteps observations (steps).
  static constexpr int64_t kPreemptedShare = 8;
  static constexpr int64_t kPreemptedNs = 200'000;
  static constexpr int kPreemptedSteps = 3;
  static constexpr int kContendedSteps = 16;

  // Feeds the thread's run-queue total and the wall clock, in nanoseconds (ThreadClock::now();
  // a negative run-queue total means unknown and changes nothing). Called once per step.
  void observe(int64_t run_delay_ns, int64_t wall_ns);

  int rounds() const { return contended() ? kContendedRounds : kIdleRounds; }
  bool contended() const { return contended_steps_ > 0; }

 private:
  int64_t last_delay_ns_ = -1;  // none observed yet
  int64_t last_wall_ns_ = 0;
  int preempted_in_a_row_ = 0;
  int contended_steps_ = 0;
};

// What observe() reads of the calling thread.
struct ThreadClock {
  int64_t run_delay_ns = -1;  // runnable but waiting for a CPU, in total; -1 where not reported
  int64_t wall_ns = 0;        // a monotonic clock

  static ThreadClock now();
};

}  // namespace md::program
