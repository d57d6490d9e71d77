#include "kernels/arithmetic_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/thread_pool.h"
#include "kernels/arithmetic_peak_chains.h"

namespace md::kernels {

namespace {

// The portable path multiplies and adds separately (no fma is assumed; this file is compiled
// with -ffp-contract=off): two operations, as an fma counts.
struct Scalar {
  using Vec = float;
  static constexpr int kLanes = 1;
  static constexpr int kChains = 16;
  static Vec set1(float x) { return x; }
  static Vec fma(Vec a, Vec b, Vec c) { return a * b + c; }
  static Vec add(Vec a, Vec b) { return a + b; }
  static void store(float* p, Vec v) { *p = v; }
};

}  // namespace

int64_t fma_chains_scalar(int64_t iterations, float& sink) {
  return fma_chains<Scalar>(iterations, sink);
}

double measure_fma_peak(Isa isa, int threads, double seconds) {
  int64_t (*chains)(int64_t, float&) = fma_chains_scalar;
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) chains = fma_chains_avx512;
  if (isa == Isa::kAvx2) chains = fma_chains_avx2;
#endif
  // About a millisecond per thread and pass on a current core: long enough to time, short
  // enough that a shared machine's interruptions miss some passes.
  constexpr int64_t kIterations = 1 << 16;
  ThreadPool pool(threads);
  std::atomic<float> sink{0};  // keeps the chains' results alive
  float out = 0;
  const int64_t operations_per_thread = chains(kIterations, out);  // also warms the core up
  using Clock = std::chrono::steady_clock;
  double best = 0;
  const Clock::time_point start = Clock::now();
  for (int pass = 0;
       pass < 2 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++pass) {
    const Clock::time_point t0 = Clock::now();
    pool.parallel_for(pool.size(), [&](int64_t first, int64_t last) {
      for (int64_t part = first; part < last; ++part) {
        float result = 0;
        chains(kIterations, result);
        sink.store(result, std::memory_order_relaxed);
      }
    });
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(operations_per_thread * pool.size()) / elapsed);
  }
  return best;
}

}  // namespace md::kernels
