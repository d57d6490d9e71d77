#include "kernels/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

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

ReadProbe::ReadProbe(int threads, std::size_t bytes)
    : words_(bytes / sizeof(uint64_t)),
      buffer_(std::make_unique<uint64_t[]>(words_)),
      pool_(threads),
      sums_(static_cast<std::size_t>(pool_.size())) {
  // Touch every page from the thread that will read it (first-touch placement).
  pool_.parallel_for(static_cast<int64_t>(words_), [&](int64_t begin, int64_t end) {
    std::memset(buffer_.get() + begin, 1, static_cast<std::size_t>(end - begin) * sizeof(uint64_t));
  });
}

double ReadProbe::pass(int pattern) {
  using Clock = std::chrono::steady_clock;
  const auto parts = static_cast<std::size_t>(pool_.size());
  Clock::time_point start = Clock::now();
  pool_.parallel_for(pool_.size(), [&](int64_t first, int64_t last) {
    for (auto part = static_cast<std::size_t>(first); part < static_cast<std::size_t>(last);
         ++part) {
      std::size_t begin = words_ * part / parts;
      std::size_t end = words_ * (part + 1) / parts;
      sums_[part] += sum_pattern(pattern, buffer_.get() + begin, end - begin);
    }
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Read the sums once, so that the passes cannot be optimised away.
  volatile uint64_t sink = 0;
  for (uint64_t sum : sums_) sink = sink + sum;
  return seconds;
}

double measure_read_bandwidth(int threads, std::size_t bytes, double seconds) {
  using Clock = std::chrono::steady_clock;
  ReadProbe probe(threads, bytes);
  double best = 0;
  Clock::time_point start = Clock::now();
  // Passes take the read patterns in turn; the best of any is the bandwidth.
  for (int pass = 0; pass < 2 * ReadProbe::kPatterns ||
                     std::chrono::duration<double>(Clock::now() - start).count() < seconds;
       ++pass) {
    best = std::max(best,
                    static_cast<double>(probe.bytes()) / probe.pass(pass % ReadProbe::kPatterns));
  }
  return best;
}

}  // namespace md::kernels
