// How a bf16 or GGUF product with a few input rows walks its weight rows: a performance choice
// only, since the walk never changes a result (matmul_blocked.h's reduction-order contract; tested
// bit for bit in both walks on every CPU through weight_streaming_testing.h).
//
// Decode at one row streams every weight byte once, so its speed is how well the CPU's
// prefetchers keep the reads in flight. Two kinds of CPU want opposite things here:
//  - kPrefetch (the default): eight adjacent rows side by side and a software prefetch ahead of
//    them. Measured on an AVX-512 Xeon: +5-10 % at 1-4 input rows, and short rows (2 KB) from
//    83-92 % to 98-105 % of the read bandwidth with the next block prefetched (bench/README.md).
//  - kHardware: no software prefetch, and a tile's rows split into four parts read in lockstep
//    (matmul_blocked.h, far_streams): four sequential streams per thread, far apart, whose four
//    accumulator chains overlap. Measured on AMD Zen 4 (EPYC 9004, AVX-512), a one-row GEMV over
//    1 GiB of bf16 with 2 threads: 1.44x the kPrefetch walk at 1024 columns, 1.15-1.25x at
//    2048-6144 (medians of 9 interleaved runs); one thread 2.2x at 1024 columns (26.6 vs 12.3
//    GB/s). Zen's prefetchers follow a few long streams by themselves; eight adjacent 2 KB rows
//    look to them like short streams, and software prefetches only compete for the load queue.
// Chosen once per process from CPUID (AMD and Hygon families 0x19 and later, Zen 3 onwards:
// kHardware; everything else: kPrefetch); MEGADECODE_WEIGHT_STREAMING=prefetch|hardware forces
// one (benchmarks compare the two in the same build). Products with a few input rows (as many as
// leave registers for four weight rows) take the four-part walk too; more keep the blocked walk.
// GGUF products take it as well (gguf_matmul_blocked.h), keeping their prefetch a page ahead in
// each stream, which they need on Zen 4 too.
#pragma once

#include <cstdint>
#include <string_view>

namespace md::kernels {

enum class WeightStreaming : uint8_t { kPrefetch, kHardware };

// kHardware walks a long row range in windows of at most this many bytes: parts hundreds of MB
// apart streamed at a third of the speed on Zen 4 (DRAM pages or prefetcher training; windows of
// 0.5-16 MB were alike).
constexpr int64_t kFarWindowBytes = 2 << 20;

namespace {  // internal linkage: the ISA translation units include this (matmul_blocked.h)

// Weight rows of `row_bytes` bytes in one kHardware window: at least one per part.
constexpr int64_t far_window_rows(int64_t row_bytes, int64_t parts) {
  const int64_t rows = kFarWindowBytes / (row_bytes > 0 ? row_bytes : 1);
  return rows > parts ? rows : parts;
}

// The kHardware walk over weight rows [row_begin, row_end) of `row_bytes` bytes each, shared by the
// bf16 and GGUF products: windows of at most kFarWindowBytes, each split into `parts` equal parts
// read in lockstep — lockstep(r, part) takes rows r, r + part, …, r + (parts - 1)·part — then the
// window's rows after its last whole part one at a time, single(r).
template <class Lockstep, class Single>
inline void walk_far_streams(int64_t row_begin, int64_t row_end, int64_t row_bytes, int64_t parts,
                             Lockstep&& lockstep, Single&& single) {
  const int64_t window = far_window_rows(row_bytes, parts);
  for (int64_t w0 = row_begin; w0 < row_end; w0 += window) {
    const int64_t w1 = row_end - w0 < window ? row_end : w0 + window;
    const int64_t part = (w1 - w0) / parts;
    for (int64_t i = 0; i < part; ++i) lockstep(w0 + i, part);
    for (int64_t r = w0 + parts * part; r < w1; ++r) single(r);
  }
}

}  // namespace

const char* weight_streaming_name(WeightStreaming streaming);

// The walk this CPU gets by default.
WeightStreaming default_weight_streaming();

// The walk the kernels use: the default, or MEGADECODE_WEIGHT_STREAMING when set. Fixed at the
// first call.
WeightStreaming active_weight_streaming();

// Resolves a MEGADECODE_WEIGHT_STREAMING value (empty: the default); exposed for tests.
WeightStreaming resolve_weight_streaming(std::string_view requested, WeightStreaming fallback);

// Whether a vendor string and CPUID family (base + extended) get kHardware; exposed for tests.
bool streams_by_hardware(std::string_view vendor, unsigned family);

}  // namespace md::kernels
