// The many-row block shared by the matrix kernels' prefill paths (gguf_matmul_panels.h for GGUF
// blocks, matmul_blocked.h for bf16): a panel of weight rows already in f32 (unpacked or widened
// once per call, exactly) and a dense block of R weight rows × N activation rows over it, so that
// each activation vector loaded serves R rows and each weight vector N rows.
//
// The order is the calling kernel's contract: column c goes to lane c % kLanes of accumulator
// (c / kLanes) % A of its output (A = 2 for GGUF blocks, 1 for bf16), each lane adds its columns
// in increasing order with one fma each, and the output is V::sum of the accumulators added in
// order. So a row computed here is bitwise the row the kernel's GEMV computes alone.
//
// Traits V: Vec, kLanes, zero(), add(a, b) (A > 1), fma(w, x, acc), inputs(p) (kLanes f32),
// sum(v).
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/isa_scratch.h"

namespace md::kernels::dense {

// A panel of about this many bytes stays in L2 while every group of activation rows passes over
// it.
constexpr int64_t kPanelBytes = 64 * 1024;

// Sums of R f32 weight rows (w, w_stride apart) × N activation rows (x, x_stride apart) over
// `cols` columns (a multiple of A · kLanes): sums[i * N + j].
template <class V, int A, int R, int N>
void block(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t cols,
           float* sums) {
  using Vec = typename V::Vec;
  Vec acc[R][N][A];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
#pragma GCC unroll 2
      for (int a = 0; a < A; ++a) acc[i][j][a] = V::zero();
    }
  }
  for (int64_t c = 0; c < cols; c += A * V::kLanes) {
#pragma GCC unroll 2
    for (int a = 0; a < A; ++a) {
      const int64_t at = c + a * V::kLanes;
      Vec wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = V::inputs(w + i * w_stride + at);
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        Vec xv = V::inputs(x + j * x_stride + at);
        // Held in a register for the R fmas: left alone, the compiler folds the load into each
        // fma instead, and R loads per activation vector made the block load-bound (measured on
        // the AVX-512 Xeon: 94 → 119 GFLOP/s per thread at 576 columns).
        __asm__("" : "+v"(xv));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][j][a] = V::fma(wv[i], xv, acc[i][j][a]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      Vec total = acc[i][j][0];
      if constexpr (A == 2) total = V::add(total, acc[i][j][1]);
      sums[i * N + j] = V::sum(total);
    }
  }
}

using BlockFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*);

// fn[N - 1][R - 1] up to kRows × kGroup: the ragged ends of a panel and of the activation rows
// take smaller blocks.
template <int kRows, int kGroup>
struct BlockTable {
  BlockFn fn[kGroup][kRows];
};

template <class V, int A, int kRows, int kGroup, int... I>
constexpr BlockTable<kRows, kGroup> make_blocks(std::integer_sequence<int, I...>) {
  BlockTable<kRows, kGroup> table{};
  auto fill = [&]<int N, int R>() { table.fn[N - 1][R - 1] = block<V, A, R, N>; };
  (fill.template operator()<I / kRows + 1, I % kRows + 1>(), ...);
  return table;
}

template <class V, int A, int kRows, int kGroup>
inline constexpr BlockTable<kRows, kGroup> kBlocks =
    make_blocks<V, A, kRows, kGroup>(std::make_integer_sequence<int, kRows * kGroup>());

// Weight rows in panels of about kPanelBytes, a multiple of kRows: `unpack(r, dst)` writes row r
// (cols f32) into the panel, then every group of activation rows runs the dense blocks over it;
// y[n][r] (+)= the sums, at out_y[n * y_stride + r].
template <class V, int A, int kRows, int kGroup, class Unpack>
void panels(int64_t row_begin, int64_t row_end, int64_t cols, const float* x, int64_t x_stride,
            int64_t n_rows, float* out_y, int64_t y_stride, bool accumulate, Unpack&& unpack) {
  int64_t panel = kPanelBytes / (cols * static_cast<int64_t>(sizeof(float))) / kRows * kRows;
  if (panel < kRows) panel = kRows;
  thread_local IsaScratch<V, float> scratch;
  float* const unpacked = scratch.at_least(static_cast<std::size_t>(panel * cols));
  float sums[kRows * kGroup];
  for (int64_t p0 = row_begin; p0 < row_end; p0 += panel) {
    const int64_t p1 = row_end - p0 < panel ? row_end : p0 + panel;
    for (int64_t r = p0; r < p1; ++r) unpack(r, unpacked + (r - p0) * cols);
    for (int64_t n0 = 0; n0 < n_rows; n0 += kGroup) {
      const int group = static_cast<int>(n_rows - n0 < kGroup ? n_rows - n0 : kGroup);
      for (int64_t i0 = p0; i0 < p1; i0 += kRows) {
        const int rows = static_cast<int>(p1 - i0 < kRows ? p1 - i0 : kRows);
        kBlocks<V, A, kRows, kGroup>.fn[group - 1][rows - 1](
            unpacked + (i0 - p0) * cols, cols, x + n0 * x_stride, x_stride, cols, sums);
        for (int i = 0; i < rows; ++i) {
          for (int j = 0; j < group; ++j) {
            float& y = out_y[(n0 + j) * y_stride + i0 + i];
            y = accumulate ? y + sums[i * group + j] : sums[i * group + j];
          }
        }
      }
    }
  }
}

}  // namespace md::kernels::dense
