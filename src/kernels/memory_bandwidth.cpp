#include "kernels/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>

#include "base/thread_pool.h"

namespace md::kernels {

namespace {

// Four independent accumulators so the loop is bound by loads, not by the add chain.
uint64_t sum_words(const uint64_t* words, std::size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += words[i];
    b += words[i + 1];
    c += words[i + 2];
    d += words[i + 3];
  }
  for (; i < n; ++i) a += words[i];
  return a + b + c + d;
}

}  // namespace

double measure_read_bandwidth(int threads, std::size_t bytes, double seconds) {
  std::size_t n = bytes / sizeof(uint64_t);
  auto buffer = std::make_unique<uint64_t[]>(n);
  ThreadPool pool(threads);
  // Touch every page from the thread that will read it (first-touch placement).
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t begin, int64_t end) {
    std::memset(buffer.get() + begin, 1, static_cast<std::size_t>(end - begin) * sizeof(uint64_t));
  });
  using Clock = std::chrono::steady_clock;
  double best = 0;
  volatile uint64_t sink = 0;
  Clock::time_point start = Clock::now();
  for (int pass = 0; pass < 2 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++pass) {
    Clock::time_point t0 = Clock::now();
    pool.parallel_for(pool.size(), [&](int64_t first, int64_t last) {
      for (int64_t part = first; part < last; ++part) {
        std::size_t begin = n * static_cast<std::size_t>(part) / static_cast<std::size_t>(pool.size());
        std::size_t end = n * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(pool.size());
        sink = sink + sum_words(buffer.get() + begin, end - begin);
      }
    });
    double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / elapsed);
  }
  return best;
}

}  // namespace md::kernels
