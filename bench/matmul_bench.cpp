// Weight-streaming speed of the bf16 matmul kernels, per instruction-set path (and the opt-in
// bf16-input path, "avx512bf16", where the CPU has AVX512-BF16), next to this
// machine's read bandwidth measured in the same run: decode at batch 1 is bound by it, and a
// batch of up to 8 rows should cost little more than one.
//
//   matmul_bench [--mib=64] [--cols=4096] [--tile-rows=0] [google benchmark flags]
//
// --cols sets the row length (a decode step's matrices have 1024 to 17408 columns); --tile-rows=N
// deals tiles of N rows to the threads in turn, as the fused executor's tasks are claimed, instead
// of one contiguous share each (0), so that the cost of starting a tile shows.
//
// By default each benchmark runs 5 times in random order (--benchmark_repetitions=5
// --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2).
//
// After the runs a summary gives, from the fastest pass of each, every kernel's GB/s as a
// fraction of the read bandwidth with the same thread count, and the time of n rows relative to
// one row. 64 MiB may fit in a large L3; --mib=512 measures DRAM.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul_kernels.h"
#include "kernels/weight_streaming.h"

namespace {

using md::kernels::Isa;

int64_t g_cols = 4096;                   // row length (--cols)
constexpr int64_t kThreadRowGrain = 48;  // threads split rows at row-block boundaries
int64_t g_rows = 8192;                   // 64 MiB of bf16 by default (--mib)
int64_t g_tile_rows = 0;                 // rows per tile dealt in turn; 0: one share per thread

std::vector<uint16_t> make_weights() {
  std::vector<uint16_t> w(static_cast<std::size_t>(g_rows * g_cols));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (uint16_t& bits : w) bits = md::f32_to_bf16(normal(rng));
  return w;
}

const std::vector<uint16_t>& weights() {
  static const std::vector<uint16_t> w = make_weights();
  return w;
}

double weight_bytes() {
  return static_cast<double>(weights().size() * sizeof(uint16_t));
}

// Fastest pass of each benchmark's last run, for the summary: the machine may be shared, and the
// fastest pass is the one least disturbed.
std::map<std::string, double> g_seconds;

// Times each iteration of `body` and reports the rate of weight bytes over real time.
template <typename Body>
void timed(benchmark::State& state, const std::string& key, Body&& body) {
  double fastest = 1e30;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    body();
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count());
    fastest = std::min(fastest, elapsed.count());
  }
  auto [it, fresh] = g_seconds.emplace(key, fastest);
  if (!fresh) it->second = std::min(it->second, fastest);
  state.counters["GB/s"] =
      benchmark::Counter(weight_bytes() * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Eight consecutive rows read side by side, 64 bytes from each in turn: the access pattern of
// the matmul, and faster than one stream (the prefetchers then have several pages in flight).
constexpr int64_t kReadRows = 8;

__attribute__((target("avx2"))) uint64_t sum_rows_avx2(const uint16_t* data, int64_t rows) {
  __m256i acc[kReadRows];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; r += kReadRows) {
    for (int64_t c = 0; c < g_cols; c += 32) {
      for (int64_t i = 0; i < kReadRows; ++i) {
        const auto* p = reinterpret_cast<const __m256i*>(data + (r + i) * g_cols + c);
        acc[i] = _mm256_add_epi64(
            acc[i], _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1)));
      }
    }
  }
  for (int64_t i = 1; i < kReadRows; ++i) acc[0] = _mm256_add_epi64(acc[0], acc[i]);
  return static_cast<uint64_t>(_mm256_extract_epi64(acc[0], 0));
}

// One sequential stream: AMD Zen 4 reads faster this way than with eight
// (kernels/weight_streaming.h).
__attribute__((target("avx2"))) uint64_t sum_one_stream_avx2(const uint16_t* data, int64_t rows) {
  __m256i acc[kReadRows];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  const auto* p = reinterpret_cast<const __m256i*>(data);
  const int64_t vectors = rows * g_cols / 16;
  for (int64_t v = 0; v + kReadRows <= vectors; v += kReadRows) {
    for (int64_t i = 0; i < kReadRows; ++i) {
      acc[i] = _mm256_add_epi64(acc[i], _mm256_loadu_si256(p + v + i));
    }
  }
  for (int64_t i = 1; i < kReadRows; ++i) acc[0] = _mm256_add_epi64(acc[0], acc[i]);
  return static_cast<uint64_t>(_mm256_extract_epi64(acc[0], 0));
}

// Four streams within each 2 MiB, the walk of the one-row GEMV on AMD Zen 4 (kernels/
// weight_streaming.h, matmul_blocked.h's far_streams).
__attribute__((target("avx2"))) uint64_t sum_far_streams_avx2(const uint16_t* data, int64_t rows) {
  constexpr int64_t kStreams = 4;
  constexpr int64_t kWindow = md::kernels::kFarWindowBytes / sizeof(uint16_t);  // elements
  __m256i acc[kStreams];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  const int64_t n = rows * g_cols;
  int64_t w = 0;
  for (; w + kWindow <= n; w += kWindow) {
    const uint16_t* window = data + w;
    for (int64_t i = 0; i < kWindow / kStreams; i += 16) {
      for (int64_t s = 0; s < kStreams; ++s) {
        const auto* p = reinterpret_cast<const __m256i*>(window + s * (kWindow / kStreams) + i);
        acc[s] = _mm256_add_epi64(acc[s], _mm256_loadu_si256(p));
      }
    }
  }
  // The last, partial window as one stream.
  for (; w + 16 <= n; w += 16) {
    acc[0] =
        _mm256_add_epi64(acc[0], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + w)));
  }
  uint64_t tail = 0;
  for (; w < n; ++w) tail += data[w];
  for (int64_t i = 1; i < kStreams; ++i) acc[0] = _mm256_add_epi64(acc[0], acc[i]);
  return static_cast<uint64_t>(_mm256_extract_epi64(acc[0], 0)) + tail;
}

uint64_t sum_rows_scalar(const uint16_t* data, int64_t rows) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < rows * g_cols; ++i) sum += data[i];
  return sum;
}

// Read bandwidth: summing the weight buffer itself, split across threads by rows as the matmul
// splits it; passes take eight rows side by side, one stream and four streams per 2 MiB in turn
// (the fastest pass counts).
void BM_MemoryRead(benchmark::State& state) {
  const std::vector<uint16_t>& w = weights();
  int threads = static_cast<int>(state.range(0));
  md::ThreadPool pool(threads);
  bool avx2 = md::kernels::best_isa() >= Isa::kAvx2;
  int pass = 0;
  timed(state, fmt::format("read/{}", threads), [&] {
    const int pattern = pass++ % 3;
    pool.parallel_for(g_rows / kReadRows, [&](int64_t begin, int64_t end) {
      const uint16_t* data = w.data() + begin * kReadRows * g_cols;
      int64_t rows = (end - begin) * kReadRows;
      uint64_t sum = !avx2          ? sum_rows_scalar(data, rows)
                     : pattern == 1 ? sum_one_stream_avx2(data, rows)
                     : pattern == 2 ? sum_far_streams_avx2(data, rows)
                                    : sum_rows_avx2(data, rows);
      benchmark::DoNotOptimize(sum);
    });
  });
}

// A kernel path by the name the benchmarks and the summary give it: the f32-input path of each
// instruction set, then the bf16-input one (MatmulInputs::kBf16) where the CPU has AVX512-BF16.
struct Path {
  std::string name;
  const md::kernels::MatmulKernels* kernels;
};

std::vector<Path> paths() {
  std::vector<Path> all;
  for (Isa isa : md::kernels::available_isas()) {
    all.push_back({md::kernels::isa_name(isa), &md::kernels::matmul_kernels(isa)});
  }
#if defined(__x86_64__)
  if (md::kernels::bf16_inputs_refusal(md::kernels::best_isa(), md::kernels::has_avx512_bf16())
          .empty()) {
    all.push_back({"avx512bf16", &md::kernels::kMatmulAvx512Bf16});
  }
#endif
  return all;
}

void BM_Matmul(benchmark::State& state, const Path& path) {
  const std::vector<uint16_t>& w = weights();
  const int64_t rows = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const md::kernels::MatmulKernels& kernels = *path.kernels;
  md::ThreadPool pool(threads);
  std::vector<float> x(static_cast<std::size_t>(rows * g_cols));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (float& value : x) value = normal(rng);
  std::vector<float> y(static_cast<std::size_t>(rows * g_rows));
  md::kernels::Bf16Matrix matrix{w.data(), g_rows, g_cols};
  const int64_t blocks = (g_rows + kThreadRowGrain - 1) / kThreadRowGrain;
  timed(state, fmt::format("{}/{}/{}", path.name, rows, threads), [&] {
    if (g_tile_rows == 0) {
      pool.parallel_for(blocks, [&](int64_t begin, int64_t end) {
        kernels.tile(matrix, begin * kThreadRowGrain, std::min(end * kThreadRowGrain, g_rows),
                     x.data(), g_cols, rows, md::kernels::MatmulOut{y.data(), g_rows, false});
      });
    } else {
      // Tiles dealt round-robin, as claims hand them out: a thread's next tile is not the rows
      // after its last one.
      const int64_t tiles = (g_rows + g_tile_rows - 1) / g_tile_rows;
      pool.parallel_for(threads, [&](int64_t begin, int64_t end) {
        for (int64_t part = begin; part < end; ++part) {
          for (int64_t t = part; t < tiles; t += threads) {
            kernels.tile(matrix, t * g_tile_rows, std::min((t + 1) * g_tile_rows, g_rows), x.data(),
                         g_cols, rows, md::kernels::MatmulOut{y.data(), g_rows, false});
          }
        }
      });
    }
    benchmark::DoNotOptimize(y.data());
  });
}

void print_summary() {
  fmt::print(
      "\nweight streaming, fastest pass, {} MiB: GB/s (fraction of read bandwidth with as "
      "many threads, time relative to 1 row)\n",
      static_cast<int64_t>(weight_bytes()) >> 20);
  for (int threads : {1, 2}) {
    auto read = g_seconds.find(fmt::format("read/{}", threads));
    if (read == g_seconds.end()) continue;
    fmt::print("threads {}: read {:.1f} GB/s\n", threads, weight_bytes() / read->second / 1e9);
    for (const Path& path : paths()) {
      std::string line = fmt::format("  {:10}", path.name);
      auto one = g_seconds.find(fmt::format("{}/1/{}", path.name, threads));
      for (int rows : {1, 2, 4, 8}) {
        auto it = g_seconds.find(fmt::format("{}/{}/{}", path.name, rows, threads));
        if (it == g_seconds.end()) continue;
        line += fmt::format("  n={}: {:5.1f} GB/s ({:3.0f}%, {:.2f}x)", rows,
                            weight_bytes() / it->second / 1e9, 100 * read->second / it->second,
                            one == g_seconds.end() ? 0.0 : it->second / one->second);
      }
      fmt::print("{}\n", line);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Repetitions in random order spread the noise of a shared machine over all benchmarks alike;
  // flags given on the command line come later and win.
  std::string repetitions = "--benchmark_repetitions=5";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::string min_time = "--benchmark_min_time=0.2";
  std::vector<char*> args{argv[0], repetitions.data(), interleave.data(), min_time.data()};
  // --mib=N sizes the matrix (and the read buffer), --cols its rows, --tile-rows the kernel
  // calls; they are not Google Benchmark flags.
  int64_t mib = 64;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mib=", 6) == 0) {
      mib = std::max<int64_t>(1, std::atoll(argv[i] + 6));
    } else if (std::strncmp(argv[i], "--cols=", 7) == 0) {
      g_cols = std::max<int64_t>(32, std::atoll(argv[i] + 7));
    } else if (std::strncmp(argv[i], "--tile-rows=", 12) == 0) {
      g_tile_rows = std::max<int64_t>(0, std::atoll(argv[i] + 12));
    } else {
      args.push_back(argv[i]);
    }
  }
  g_rows = std::max<int64_t>(kThreadRowGrain, mib * (1 << 20) / 2 / g_cols);
  int filtered_argc = static_cast<int>(args.size());
  benchmark::Initialize(&filtered_argc, args.data());

  benchmark::RegisterBenchmark("BM_MemoryRead", BM_MemoryRead)
      ->ArgName("threads")
      ->DenseRange(1, 2)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  for (const Path& path : paths()) {
    benchmark::RegisterBenchmark(fmt::format("BM_Matmul/{}", path.name).c_str(), BM_Matmul, path)
        ->ArgsProduct({{1, 2, 4, 8}, {1, 2}})
        ->ArgNames({"rows", "threads"})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
