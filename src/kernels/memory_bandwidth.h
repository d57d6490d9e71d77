// The machine's memory read bandwidth, measured the way a decode step reads weights: streaming a
// buffer far larger than the caches. Benchmarks report achieved speed as a fraction of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"

namespace md::kernels {

// A buffer far larger than the caches, first-touched by the threads that read it, read one pass
// at a time: for measuring the bandwidth in the same moments as other work (bench alternates
// probe passes with decode steps), since a shared machine's bandwidth drifts within seconds.
class ReadProbe {
 public:
  // CPUs differ in which read pattern their prefetchers serve fastest (memory_bandwidth.cpp).
  static constexpr int kPatterns = 3;

  ReadProbe(int threads, std::size_t bytes);
  std::size_t bytes() const { return words_ * sizeof(uint64_t); }
  // Seconds to read the whole buffer once in `pattern` (0 .. kPatterns - 1).
  double pass(int pattern);

 private:
  std::size_t words_;
  std::unique_ptr<uint64_t[]> buffer_;
  ThreadPool pool_;
  std::vector<uint64_t> sums_;  // one per part, so that the threads write apart
};

// Bytes per second summing `bytes` of memory with `threads` threads: the best of the passes that
// fit in `seconds` (at least six), which take three read patterns in turn (memory_bandwidth.cpp),
// since CPUs differ in which their prefetchers serve fastest.
double measure_read_bandwidth(int threads, std::size_t bytes, double seconds);

}  // namespace md::kernels
