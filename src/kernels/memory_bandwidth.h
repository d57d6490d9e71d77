// The machine's memory read bandwidth, measured the way a decode step reads weights: streaming a
// buffer far larger than the caches. Benchmarks report achieved speed as a fraction of it.
#pragma once

#include <cstddef>

namespace md::kernels {

// Bytes per second summing `bytes` of memory with `threads` threads: the best of the passes that
// fit in `seconds` (at least six), which take three read patterns in turn (memory_bandwidth.cpp),
// since CPUs differ in which their prefetchers serve fastest.
double measure_read_bandwidth(int threads, std::size_t bytes, double seconds);

}  // namespace md::kernels
