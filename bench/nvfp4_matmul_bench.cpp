// Weight-streaming speed of the 4-bit GEMVs — NVFP4 (kernels/nvfp4_matmul.h) or MXFP4
// (kernels/mxfp4_matmul.h) — per instruction-set path, at 1 and 8 activation rows and 1..2
// threads, next to this machine's read bandwidth measured in the same run with the same threads:
// decode at batch 1 is bound by it.
//
//   nvfp4_matmul_bench [--format=nvfp4|mxfp4] [--mib=144] [--cols=4096] [--seconds=2]
//
// The matrix holds --mib of codes and scales (NVFP4: 0.5625 bytes per weight, 4-bit codes and one
// e4m3 scale per 16; MXFP4: 0.53125, one E8M0 scale per 32). Each case reports its best pass:
// GB/s of the format's bytes, the fraction of the read bandwidth, and the bf16-equivalent rate
// (what the same weights would stream at as bf16: 3.56× the bytes for NVFP4, 3.76× for MXFP4).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/memory_bandwidth.h"
#include "kernels/mxfp4_matmul_kernels.h"
#include "kernels/nvfp4_matmul_kernels.h"

namespace {

using md::kernels::Isa;

struct Options {
  bool mxfp4 = false;
  double mib = 144;
  int64_t cols = 4096;
  double seconds = 2;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return arg.starts_with(prefix) ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* format = value("--format")) {
      o.mxfp4 = std::string(format) == "mxfp4";
      if (!o.mxfp4 && std::string(format) != "nvfp4") {
        fmt::print(stderr, "nvfp4_matmul_bench: --format is nvfp4 or mxfp4, not {}\n", format);
        std::exit(2);
      }
    } else if (const char* mib = value("--mib")) {
      o.mib = std::atof(mib);
    } else if (const char* cols = value("--cols")) {
      o.cols = std::atoll(cols);
    } else if (const char* seconds = value("--seconds")) {
      o.seconds = std::atof(seconds);
    } else {
      fmt::print(stderr, "nvfp4_matmul_bench: unknown argument {}\n", arg);
      std::exit(2);
    }
  }
  return o;
}

// Best seconds per pass of `body` over about `seconds` (at least three passes).
template <typename Body>
double best_pass(double seconds, Body&& body) {
  double best = 1e30, spent = 0;
  for (int pass = 0; pass < 3 || spent < seconds; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
    spent += elapsed.count();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const int64_t cols = o.cols;
  const int64_t block = o.mxfp4 ? 32 : 16;
  const auto row_bytes = static_cast<double>(cols / 2 + cols / block);
  const auto rows = static_cast<int64_t>(o.mib * 1024 * 1024 / row_bytes) / 64 * 64;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * cols / 2));
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(rows * cols / block));
  std::mt19937 rng(1);
  for (auto& c : codes) c = static_cast<std::uint8_t>(rng());
  for (auto& s : scales) s = static_cast<std::uint8_t>((o.mxfp4 ? 120 : 0x30) + rng() % 16);
  const md::kernels::Nvfp4Matrix nvfp4{codes.data(), scales.data(), rows, cols, 0.01f};
  const md::kernels::Mxfp4Matrix mxfp4{codes.data(), scales.data(), rows, cols};
  const double bytes = static_cast<double>(codes.size() + scales.size());
  std::vector<float> x(static_cast<std::size_t>(8 * cols), 0.5f);
  std::vector<float> y(static_cast<std::size_t>(8 * rows));

  fmt::print("{} GEMV: {} x {} ({:.0f} MiB of codes and scales), best pass of ~{} s each\n",
             o.mxfp4 ? "mxfp4" : "nvfp4", rows, cols, bytes / (1 << 20), o.seconds);
  fmt::print("{:>8} {:>7} {:>4} {:>9} {:>9} {:>10} {:>14}\n", "path", "threads", "rows",
             "read GB/s", "GB/s", "of read", "bf16-equiv GB/s");
  for (const int threads : {1, 2}) {
    const double read = md::kernels::measure_read_bandwidth(threads, codes.size(), o.seconds) / 1e9;
    md::ThreadPool pool(threads);
    for (const Isa isa : md::kernels::available_isas()) {
      const md::kernels::Nvfp4TileFn nvfp4_tile = md::kernels::nvfp4_tile_for(isa);
      const md::kernels::Mxfp4TileFn mxfp4_tile = md::kernels::mxfp4_tile_for(isa);
      for (const int64_t n : {int64_t{1}, int64_t{8}}) {
        const double seconds = best_pass(o.seconds, [&] {
          pool.parallel_for(rows / 64, [&](int64_t begin, int64_t end) {
            const md::kernels::MatmulOut out{y.data(), rows, false};
            if (o.mxfp4) {
              mxfp4_tile(mxfp4, begin * 64, end * 64, x.data(), cols, n, out);
            } else {
              nvfp4_tile(nvfp4, begin * 64, end * 64, x.data(), cols, n, out);
            }
          });
        });
        const double rate = bytes / seconds / 1e9;
        fmt::print("{:>8} {:>7} {:>4} {:>9.1f} {:>9.1f} {:>9.0f}% {:>14.1f}\n",
                   md::kernels::isa_name(isa), threads, n, read, rate, 100 * rate / read,
                   rate * 2 * static_cast<double>(cols) / row_bytes);
      }
    }
  }
  return 0;
}
