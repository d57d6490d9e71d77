// The register-blocked loop nest shared by the vector paths of kernels/gguf_matmul.h. Each path
// (gguf_matmul_avx2.cpp, gguf_matmul_avx512.cpp) instantiates it with a traits type V for its
// registers and one format type F per GGUF type:
//
//   V::Vec                  one register of f32 lanes, kLanes of them, 32 / kLanes per group
//   V::kMaxGroup            activation rows held in accumulators at once
//   V::rows_for(n)          weight rows held at once with n activation rows (2·R·n accumulators)
//   V::zero(), add(a, b), fma(a, b, c), sum(v), inputs(p)
//                           sum() adds the lanes in a fixed tree; inputs() loads kLanes floats
//   F::kBlockElems, kBlockBytes, kPlain
//                           one block of the format (plain formats: 32 elements, any tail)
//   F::Scales, F::open<R>(blocks, scales)
//                           what a block's groups share (its f16 scales, widened once per block),
//                           for the blocks of R rows at once
//   F::group(block, scales, g, w)
//                           the 32 weights 32g..32g+31 of the block, as f32 vectors w[0..]
//
// Reduction order, the determinism contract: every output has two accumulators; column c goes to
// lane c % kLanes of accumulator (c / kLanes) % 2, each lane adding its columns in increasing
// order with one fma each; then sum(acc0 + acc1). Plain formats end with a tail of fewer than 32
// columns that continues the pattern with zero weights and inputs in the missing lanes. Neither
// the block shape, the number of activation rows nor the rows in the call change any of this.
//
// All code here is a template of V (and F), and every V lives in an anonymous namespace, so each
// instantiation is private to the translation unit compiled for its instruction set.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/gguf_matmul.h"
#include "kernels/gguf_matmul_kernels.h"
#include "kernels/weight_streaming.h"

namespace md::kernels::gguf_blocked {

constexpr int kGroupElems = 32;
// Each block row also prefetches this far ahead: one 4 KB page, so the next page of the weight
// stream is on its way before the hardware prefetchers (which stop at page boundaries) reach it.
// Measured on SmolLM2 decode (rows of 360-612 bytes, one thread, a shared and noisy machine):
// 31-44 tok/s without it, 57-82 with it; distances of 1-4 KB were within the noise.
constexpr int64_t kPrefetchBytes = 4096;

// Sums of R weight rows (from `row0`) × N activation rows (x, x_stride apart): sums[i * N + j].
// Weight rows row0, row0 + row_step, …: adjacent rows (1), or far_streams' parts.
template <class V, class F, int R, int N>
void block(const GgufMatrix& w, int64_t row0, int64_t row_step, const float* x, int64_t x_stride,
           float* sums) {
  using Vec = typename V::Vec;
  constexpr int kVecs = kGroupElems / V::kLanes;
  Vec acc[R][N][2];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[i][j][0] = acc[i][j][1] = V::zero();
  }
  const std::uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = w.row(row0 + i * row_step);
  const int64_t blocks = w.cols / F::kBlockElems;
  // Accumulates one group of 32 weights of row i (in w[]) with the activations at column `col`.
  auto accumulate = [&](int i, const Vec* wv, const float* xs) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        acc[i][j][v & 1] =
            V::fma(wv[v], V::inputs(xs + j * x_stride + v * V::kLanes), acc[i][j][v & 1]);
      }
    }
  };
  for (int64_t b = 0; b < blocks; ++b) {
    typename F::Scales scales[R];
    const std::uint8_t* at[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      at[i] = rows[i] + b * F::kBlockBytes;
      __builtin_prefetch(at[i] + kPrefetchBytes);
    }
    F::template open<R>(at, scales);
#pragma GCC unroll 8
    for (int g = 0; g < F::kBlockElems / kGroupElems; ++g) {
      const float* xs = x + b * F::kBlockElems + g * kGroupElems;
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        Vec wv[kVecs];
        F::group(at[i], scales[i], g, wv);
        accumulate(i, wv, xs);
      }
    }
  }
  if constexpr (F::kPlain) {
    // Fewer than 32 columns left: weights and inputs go through zeroed copies, so nothing past
    // the row or the activations is read.
    const int tail = static_cast<int>(w.cols - blocks * F::kBlockElems);
    if (tail > 0) {
      alignas(64) float xt[N * kGroupElems] = {};
      for (int j = 0; j < N; ++j) {
        std::memcpy(xt + j * kGroupElems, x + j * x_stride + blocks * F::kBlockElems,
                    static_cast<std::size_t>(tail) * sizeof(float));
      }
      for (int i = 0; i < R; ++i) {
        alignas(64) std::uint8_t wt[F::kBlockBytes] = {};
        std::memcpy(wt, rows[i] + blocks * F::kBlockBytes,
                    static_cast<std::size_t>(tail) * (F::kBlockBytes / F::kBlockElems));
        const std::uint8_t* tail_block[1] = {wt};
        typename F::Scales tail_scales[1];
        F::template open<1>(tail_block, tail_scales);
        Vec wv[kVecs];
        F::group(wt, tail_scales[0], 0, wv);
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
#pragma GCC unroll 4
          for (int v = 0; v < kVecs; ++v) {
            acc[i][j][v & 1] =
                V::fma(wv[v], V::inputs(xt + j * kGroupElems + v * V::kLanes), acc[i][j][v & 1]);
          }
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) sums[i * N + j] = V::sum(V::add(acc[i][j][0], acc[i][j][1]));
  }
}

template <class V>
constexpr int kMaxRows = V::rows_for(1);

using BlockFn = void (*)(const GgufMatrix&, int64_t, int64_t, const float*, int64_t, float*);

// fn[N - 1][R - 1] for R up to rows_for(N) (null beyond): the ragged end of a row range takes a
// shorter block of the same group size.
template <class V>
struct BlockTable {
  BlockFn fn[V::kMaxGroup][kMaxRows<V>];
};

template <class V, class F, int... I>
constexpr BlockTable<V> make_blocks(std::integer_sequence<int, I...>) {
  BlockTable<V> table{};
  auto fill = [&]<int N, int R>() {
    if constexpr (R <= V::rows_for(N)) table.fn[N - 1][R - 1] = block<V, F, R, N>;
  };
  (fill.template operator()<I / kMaxRows<V> + 1, I % kMaxRows<V> + 1>(), ...);
  return table;
}

template <class V, class F>
inline constexpr BlockTable<V> kBlocks =
    make_blocks<V, F>(std::make_integer_sequence<int, V::kMaxGroup * kMaxRows<V>>());

// With more activation rows than one group, the weight rows of a pass are re-read once per group:
// passes of about this many weight bytes keep them in L1 for that.
constexpr int64_t kPassBytes = 16 * 1024;

template <class V>
constexpr bool rows_divide_pass_grain() {
  for (int n = 1; n <= V::kMaxGroup; ++n) {
    if (kMaxRows<V> % V::rows_for(n) != 0) return false;
  }
  return true;
}

// One or two activation rows on a CPU whose prefetchers want no help (kernels/weight_streaming.h):
// walk_far_streams, as matmul_blocked.h's far_streams, with each window's rows split into
// rows_for(1) parts (four on AVX-512, two on AVX2) read in lockstep, one stream each. Unlike the
// bf16 walk, each stream keeps its prefetch a page ahead: without it SmolLM2's Q4_1 decode fell
// from ~150 to ~90 tok/s on AMD Zen 4, as on the Xeon. Against adjacent rows on Zen 4 (AVX-512,
// SmolLM2-135M Q4_1, interleaved pairs): one row 1.02-1.26x (median 1.08x, six pairs), two rows
// 0.97-1.09x (median 1.05x, five); the AVX2 path's two parts (MEGADECODE_ISA=avx2 there) one row
// 0.98-1.09x (three pairs).
//
// Activation rows the walk holds at once: as many as leave registers for rows_for(1) weight
// rows (two on both paths).
template <class V>
bool far_streams_fit(int64_t n_rows) {
  return n_rows >= 1 && n_rows <= V::kMaxGroup &&
         V::rows_for(static_cast<int>(n_rows)) >= kMaxRows<V>;
}

template <class V, class F>
void far_streams(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  constexpr int kParts = kMaxRows<V>;
  const auto& fns = kBlocks<V, F>.fn[n_rows - 1];
  float sums[kParts * V::kMaxGroup];
  // sums[i * n_rows + j]: weight row i of the block, activation row j.
  auto store = [&](int64_t r, const float* row_sums) {
    for (int64_t j = 0; j < n_rows; ++j) {
      float& y = out.y[j * out.y_stride + r];
      y = out.accumulate ? y + row_sums[j] : row_sums[j];
    }
  };
  walk_far_streams(
      row_begin, row_end, static_cast<int64_t>(w.row_bytes), kParts,
      [&](int64_t r, int64_t part) {
        fns[kParts - 1](w, r, part, x, x_stride, sums);
        for (int k = 0; k < kParts; ++k) store(r + k * part, sums + k * n_rows);
      },
      [&](int64_t r) {
        fns[0](w, r, 1, x, x_stride, sums);
        store(r, sums);
      });
}

// Loop nest: passes of weight rows; in each, groups of up to kMaxGroup activation rows, and for
// each group register blocks of rows_for(group) weight rows.
template <class V, class F>
void tile(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t x_stride,
          int64_t n_rows, const MatmulOut& out) {
  static_assert(rows_divide_pass_grain<V>());
  if (n_rows <= 0 || row_begin >= row_end) return;
  if (far_streams_fit<V>(n_rows) && active_weight_streaming() == WeightStreaming::kHardware) {
    far_streams<V, F>(w, row_begin, row_end, x, x_stride, n_rows, out);
    return;
  }
  constexpr int64_t kGrain = kMaxRows<V>;
  int64_t pass = row_end - row_begin;
  if (n_rows > V::kMaxGroup) {
    pass = kPassBytes / static_cast<int64_t>(w.row_bytes) / kGrain * kGrain;
    if (pass < kGrain) pass = kGrain;
  }
  float sums[kMaxRows<V> * V::kMaxGroup];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += pass) {
    const int64_t r1 = row_end - r0 < pass ? row_end : r0 + pass;
    for (int64_t n0 = 0; n0 < n_rows; n0 += V::kMaxGroup) {
      const int group = static_cast<int>(n_rows - n0 < V::kMaxGroup ? n_rows - n0 : V::kMaxGroup);
      const int64_t block_rows = V::rows_for(group);
      const auto& fns = kBlocks<V, F>.fn[group - 1];
      for (int64_t i0 = r0; i0 < r1; i0 += block_rows) {
        const int64_t rr = r1 - i0 < block_rows ? r1 - i0 : block_rows;
        fns[rr - 1](w, i0, 1, x + n0 * x_stride, x_stride, sums);
        for (int64_t i = 0; i < rr; ++i) {
          for (int j = 0; j < group; ++j) {
            float& y = out.y[(n0 + j) * out.y_stride + i0 + i];
            y = out.accumulate ? y + sums[i * group + j] : sums[i * group + j];
          }
        }
      }
    }
  }
}

}  // namespace md::kernels::gguf_blocked
