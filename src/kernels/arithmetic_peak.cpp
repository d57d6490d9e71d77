#include "kernels/arithmetic_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/thread_pool.h"

namespace md::kernels {

// The portable path multiplies and adds separately (no fma is assumed): 16 chains of both.
int64_t fma_chains_scalar(int64_t iterations, float& sink) {
  constexpr int kChains = 16;
  float a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = static_cast<float>(i);
  for (int64_t k = 0; k < iterations; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) a[i] = a[i] * 0.999f + 1e-3f;
  }
  float s = 0;
  for (float x : a) s += x;
  sink = s;
  return iterations * kChains * 2;
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
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> operations{0};
  std::atomic<float> sink{0};
  double best = 0;
  const Clock::time_point start = Clock::now();
  for (int pass = 0;
       pass < 2 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++pass) {
    operations = 0;
    const Clock::time_point t0 = Clock::now();
    pool.parallel_for(pool.size(), [&](int64_t first, int64_t last) {
      for (int64_t part = first; part < last; ++part) {
        float out = 0;
        operations += chains(kIterations, out);
        sink = sink + out;
      }
    });
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(operations.load()) / elapsed);
  }
  return best;
}

}  // namespace md::kernels
