#include "kernels/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/weight_streaming.h"

namespace md::kernels {

namespace {

// kStreams streams read side by side, each a part of `words`. Independent accumulators keep the
// loop bound by loads, not by the add chain.
template <std::size_t kStreams>
uint64_t sum_streams(const uint64_t* words, std::size_t n) {
  std::size_t length = n / kStreams;
  uint64_t acc[kStreams] = {};
  for (std::size_t i = 0; i < length; ++i) {
    for (std::size_t s = 0; s < kStreams; ++s) acc[s] += words[s * length + i];
  }
  uint64_t total = 0;
  for (std::size_t i = kStreams * length; i < n; ++i) total += words[i];
  for (uint64_t a : acc) total += a;
  return total;
}

// One sequential stream, with independent accumulators.
uint64_t sum_one_stream(const uint64_t* words, std::size_t n) {
  constexpr std::size_t kAccumulators = 8;
  uint64_t acc[kAccumulators] = {};
  std::size_t full = n - n % kAccumulators;
  for (std::size_t i = 0; i < full; i += kAccumulators) {
    for (std::size_t a = 0; a < kAccumulators; ++a) acc[a] += words[i + a];
  }
  uint64_t total = 0;
  for (std::size_t i = full; i < n; ++i) total += words[i];
  for (uint64_t a : acc) total += a;
  return total;
}

// The read patterns the passes take in turn. CPUs differ in which their prefetchers serve
// fastest, and a kernel walking its weights one way must not beat the figure it is measured
// against: eight far streams per thread (as eight adjacent weight rows read ahead served an
// AVX-512 Xeon), one stream, and four streams within each 2 MiB (the matmuls' walk on AMD Zen 4,
// kernels/weight_streaming.h; there the eight far streams alone read 14.7 GB/s on one thread,
// one stream 25).
constexpr int kPatterns = 3;

uint64_t sum_pattern(int pattern, const uint64_t* words, std::size_t n) {
  if (pattern == 0) return sum_streams<8>(words, n);
  if (pattern == 1) return sum_one_stream(words, n);
  constexpr std::size_t kWindowWords = kFarWindowBytes / sizeof(uint64_t);
  uint64_t total = 0;
  for (std::size_t w = 0; w < n; w += kWindowWords) {
    total += sum_streams<4>(words + w, std::min(kWindowWords, n - w));
  }
  return total;
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
  // One sum per part, so that the threads write apart; read once after the passes, so that the
  // sums cannot be optimised away.
  std::vector<uint64_t> sums(static_cast<std::size_t>(pool.size()));
  Clock::time_point start = Clock::now();
  // Passes take the read patterns in turn; the best of any is the bandwidth.
  for (int pass = 0; pass < 2 * kPatterns ||
                     std::chrono::duration<double>(Clock::now() - start).count() < seconds;
       ++pass) {
    const int pattern = pass % kPatterns;
    Clock::time_point t0 = Clock::now();
    pool.parallel_for(pool.size(), [&](int64_t first, int64_t last) {
      for (int64_t part = first; part < last; ++part) {
        std::size_t begin =
            n * static_cast<std::size_t>(part) / static_cast<std::size_t>(pool.size());
        std::size_t end =
            n * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(pool.size());
        sums[static_cast<std::size_t>(part)] +=
            sum_pattern(pattern, buffer.get() + begin, end - begin);
      }
    });
    double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / elapsed);
  }
  volatile uint64_t sink = 0;
  for (uint64_t sum : sums) sink = sink + sum;
  return best;
}

}  // namespace md::kernels
