// The register-blocked loop nest shared by the vector paths of kernels/matmul.h. Each path
// (matmul_avx2.cpp, matmul_avx512.cpp, matmul_avx512_bf16.cpp) instantiates it with a traits
// type V for its registers:
//
//   using Vec;                        one accumulator register of f32 lanes
//   kLanes                            f32 lanes per Vec
//   using Weights, Inputs             the registers weights(p) and inputs(p) return: Vec where
//                                     both are widened to f32, bf16 pairs for vdpbf16ps
//   kStep                             columns per step: kLanes, or 2·kLanes for bf16 pairs
//   using InputElement                what inputs(p) reads: float, the caller's inputs, or
//                                     another type that stage(x, n, out) converts each input
//                                     row's chunk to once per row block (so the conversion is
//                                     shared by all its weight rows)
//   kMaxGroup                         input rows held in accumulators at once
//   rows_for(n)                       weight rows held at once with n input rows (R·n accumulators)
//   kRowBlock                         weight rows per pass, a multiple of every rows_for(n)
//   kChunkBytes                       L1 bytes a pass may keep (inputs, weights reused)
//   kPrefetch                         the first input-row group of a pass (the one that pulls the
//                                     weights from memory) prefetches kPrefetch elements ahead,
//                                     whatever its size
//   zero(), fma(w, x, acc), sum(acc)  fma() adds the products of one step's columns into acc;
//                                     sum() adds the lanes in a fixed tree
//   weights(p), weights_tail(p, k)    kStep (or k < kStep, rest zero) bf16 weights
//   inputs(p), inputs_tail(p, k)      kStep (or k) inputs, as the path multiplies them
//   prefetch(p)
//
// Reduction order, the determinism contract: in every output, the columns of each step of kStep
// go to fixed lanes (column c to lane c % kLanes, or the pair c / 2 % kLanes; the tail continues
// the pattern) and each lane adds its steps in increasing column order with one fma each; the
// lanes are then added by sum(). Neither the block shape, the number of input rows, the output
// rows in the call nor the column chunks change that: accumulators that outlive a chunk are
// stored and reloaded exactly.
//
// All code here is a template of V, and every V lives in an anonymous namespace, so each
// instantiation is private to the translation unit compiled for its instruction set: no inline
// function compiled with AVX-512 can be picked by the linker for code that runs on any CPU.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/bf16_matrix.h"
#include "kernels/dense_panel.h"
#include "kernels/matmul.h"
#include "kernels/weight_streaming.h"

namespace md::kernels::blocked {

// One pass of a register block over a column chunk, reading inputs of type X.
template <class X>
struct Chunk {
  const uint16_t* w;  // first weight row of the block, at the chunk's first column
  int64_t w_stride;   // elements between weight rows
  const X* x;         // first input row of the block, at the chunk's first column
  int64_t x_stride;
  int64_t len;  // whole steps in the chunk, in elements
  int tail;     // columns after len that end the matrix (last chunk only), < kStep
  bool first;   // accumulators start at zero instead of being reloaded
};

// R weight rows × N input rows; acc[i * acc_stride + j] carries the accumulators between chunks.
// Prefetching is left to the first input-row group, the one that pulls the weights from memory.
// Rows this short (R of them at most this many bytes) prefetch the next register block instead of
// a fixed distance ahead: the block's rows are contiguous and the next block's follow, but a
// fixed distance within a row reaches them only near the block's end, so with 2 KB rows every
// block started on demand misses (1024-column bf16 rows streamed at 83-92% of the read bandwidth,
// 98-105% with this; 4096-column rows lose with it, matmul_bench --mib=1024).
constexpr int64_t kNextBlockBytes = 16 * 1024;

template <class V, int R, int N, bool Prefetch>
void block(const Chunk<typename V::InputElement>& c, typename V::Vec* acc, int64_t acc_stride) {
  using Vec = typename V::Vec;
  using Weights = typename V::Weights;
  using Inputs = typename V::Inputs;
  const bool short_rows =
      R * c.w_stride * static_cast<int64_t>(sizeof(uint16_t)) <= kNextBlockBytes;
  const uint16_t* ahead = short_rows ? c.w + R * c.w_stride : c.w + V::kPrefetch;
  Vec a[R][N];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) a[i][j] = c.first ? V::zero() : acc[i * acc_stride + j];
  }
  for (int64_t k = 0; k < c.len; k += V::kStep) {
    Weights wv[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      // One prefetch per 64-byte line (one step of 32 bf16, two of 16 or four of 8).
      if constexpr (Prefetch) {
        if ((k & (32 - 1)) == 0) V::prefetch(ahead + i * c.w_stride + k);
      }
      wv[i] = V::weights(c.w + i * c.w_stride + k);
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      Inputs xv = V::inputs(c.x + j * c.x_stride + k);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) a[i][j] = V::fma(wv[i], xv, a[i][j]);
    }
  }
  if (c.tail > 0) {
    Weights wv[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) wv[i] = V::weights_tail(c.w + i * c.w_stride + c.len, c.tail);
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      Inputs xv = V::inputs_tail(c.x + j * c.x_stride + c.len, c.tail);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) a[i][j] = V::fma(wv[i], xv, a[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[i * acc_stride + j] = a[i][j];
  }
}

template <class V>
using BlockFn = void (*)(const Chunk<typename V::InputElement>&, typename V::Vec*, int64_t);

// fn[prefetch][N - 1][R - 1] for R up to rows_for(N) (null beyond): ragged edges of a row block
// take a shorter block of the same group size.
template <class V>
struct BlockTable {
  BlockFn<V> fn[2][V::kMaxGroup][V::rows_for(1)];
};

template <class V, bool Prefetch, int... I>
constexpr void fill_blocks(BlockTable<V>& table, std::integer_sequence<int, I...>) {
  constexpr int kMaxR = V::rows_for(1);
  auto fill = [&]<int N, int R>() {
    if constexpr (R <= V::rows_for(N)) table.fn[Prefetch][N - 1][R - 1] = block<V, R, N, Prefetch>;
  };
  (fill.template operator()<I / kMaxR + 1, I % kMaxR + 1>(), ...);
}

template <class V>
constexpr BlockTable<V> make_blocks() {
  BlockTable<V> table{};
  constexpr int kEntries = V::kMaxGroup * V::rows_for(1);
  fill_blocks<V, false>(table, std::make_integer_sequence<int, kEntries>());
  fill_blocks<V, true>(table, std::make_integer_sequence<int, kEntries>());
  return table;
}

template <class V>
inline constexpr BlockTable<V> kBlocks = make_blocks<V>();

template <class V>
constexpr bool row_block_fits() {
  for (int n = 1; n <= V::kMaxGroup; ++n) {
    if (V::kRowBlock % V::rows_for(n) != 0 || V::rows_for(n) > V::rows_for(1)) return false;
  }
  return true;
}

template <class V>
constexpr bool kStagedInputs = !std::is_same_v<typename V::InputElement, float>;

template <class V>
void tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t x_stride,
          int64_t n_rows, const MatmulOut& out);

template <class V>
float dot(const uint16_t* w, const float* x, int64_t n) {
  if constexpr (kStagedInputs<V>) {
    // One output of the tile, so that the inputs are staged as there.
    float y = 0;
    tile<V>(Bf16Matrix{w, 1, n}, 0, 1, x, n, 1, MatmulOut{&y, 1, false});
    return y;
  } else {
    int64_t full = n - n % V::kStep;
    typename V::Vec acc;
    block<V, 1, 1, false>(Chunk<float>{w, 0, x, 0, full, static_cast<int>(n - full), true}, &acc,
                          1);
    return V::sum(acc);
  }
}

// Many input rows (a prefill chunk) with f32 inputs: panels of weight rows widened once into f32
// (exactly) and the dense blocks of dense_panel.h over them, in this file's order (one
// accumulator per output, column c to lane c % kLanes): the GEMV below re-widens each weight
// vector for every pass of 16 input rows. Rows of whole vectors only (no tail).
template <class V>
bool panels_apply(const Bf16Matrix& w, int64_t n_rows) {
  return n_rows > 2 * V::kMaxGroup && w.cols % V::kLanes == 0;
}

template <class V>
void panels(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x,
            int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  // bf16 is an f32's top half (written out here: base's inline bf16_to_f32 compiled into an
  // ISA's file could be the one copy every caller links to).
  auto widen_row = [&](int64_t r, float* dst) {
    const uint16_t* row = w.data + r * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) {
      dst[c] = std::bit_cast<float>(static_cast<uint32_t>(row[c]) << 16);
    }
  };
  dense::panels<V, 1, V::kPanelRows, V::kPanelGroup>(row_begin, row_end, w.cols, x, x_stride,
                                                     n_rows, out.y, out.y_stride, out.accumulate,
                                                     widen_row);
}

// A few input rows on a CPU whose prefetchers want no help (WeightStreaming::kHardware): the
// weight rows split into kFarStreams equal parts read in lockstep, row i of every part at once,
// each row whole (no column chunks) and no software prefetch. Each part is one sequential
// stream, far from the others, and the parts' independent accumulator chains overlap (one row
// alone is bound by its chain of dependent fmas). Measured on AMD Zen 4 (1 GiB of bf16, 2
// threads, medians of 7-9 interleaved runs) against the blocked walk below: one input row 1.44x
// at 1024 columns and 1.15-1.25x at 2048-6144 (two parts, eight, one row at a time and eight
// adjacent rows without prefetch were all slower); two input rows 1.16-2.05x, four 1.13-1.31x,
// six 1.20-1.25x at 1024-4096 columns. Up to as many input rows as leave registers for four
// weight rows (far_streams_fit).
// The windows, the parts and the rows after the last whole part: walk_far_streams
// (weight_streaming.h), shared with the GGUF products.
inline constexpr int kFarStreams = 4;

// Input rows x (x_stride apart) held at once by the four-part walk: as many as leave room for
// kFarStreams weight rows in the registers (AVX-512: up to 6, AVX2: up to 2).
template <class V>
bool far_streams_fit(int64_t n_rows) {
  return n_rows >= 1 && n_rows <= V::kMaxGroup &&
         V::rows_for(static_cast<int>(n_rows)) >= kFarStreams;
}

template <class V>
void far_streams(const Bf16Matrix& w, int64_t row_begin, int64_t row_end,
                 const typename V::InputElement* x, int64_t x_stride, int64_t n_rows,
                 const MatmulOut& out) {
  static_assert(kFarStreams <= V::rows_for(1));
  using Vec = typename V::Vec;
  using X = typename V::InputElement;
  const int64_t cols = w.cols;
  const int64_t full = cols - cols % V::kStep;
  const int tail = static_cast<int>(cols - full);
  const auto& fns = kBlocks<V>.fn[false][n_rows - 1];
  Vec acc[kFarStreams * V::kMaxGroup];
  auto store = [&](int64_t r, const Vec* sums) {
    for (int64_t j = 0; j < n_rows; ++j) {
      float sum = V::sum(sums[j]);
      float& y = out.y[j * out.y_stride + r];
      y = out.accumulate ? y + sum : sum;
    }
  };
  walk_far_streams(
      row_begin, row_end, cols * static_cast<int64_t>(sizeof(uint16_t)), kFarStreams,
      [&](int64_t r, int64_t part) {
        fns[kFarStreams - 1](Chunk<X>{w.row(r), part * cols, x, x_stride, full, tail, true}, acc,
                             n_rows);
        for (int s = 0; s < kFarStreams; ++s) store(r + s * part, acc + s * n_rows);
      },
      [&](int64_t r) {
        fns[0](Chunk<X>{w.row(r), cols, x, x_stride, full, tail, true}, acc, n_rows);
        store(r, acc);
      });
}

// Loop nest (several input rows, or the kPrefetch walk): kRowBlock weight rows × up to kPass input
// rows per pass, in groups of kMaxGroup. Within a pass, column chunks small enough that the inputs
// of the chunk stay in L1 across the weight rows, and, when there are several groups, that the
// weights the first group pulls from memory are still in L1 for the others.
template <class V>
void tile(const Bf16Matrix& w, int64_t row_begin, int64_t row_end, const float* x, int64_t x_stride,
          int64_t n_rows, const MatmulOut& out) {
  if (n_rows <= 0 || row_begin >= row_end) return;
  // A few input rows on a CPU whose prefetchers want no help (kernels/weight_streaming.h).
  const bool by_hardware = active_weight_streaming() == WeightStreaming::kHardware;
  if constexpr (!kStagedInputs<V>) {
    if (panels_apply<V>(w, n_rows)) {
      panels<V>(w, row_begin, row_end, x, x_stride, n_rows, out);
      return;
    }
    if (by_hardware && far_streams_fit<V>(n_rows)) {
      far_streams<V>(w, row_begin, row_end, x, x_stride, n_rows, out);
      return;
    }
  }
  using Vec = typename V::Vec;
  using X = typename V::InputElement;
  constexpr int64_t kPass = 2 * V::kMaxGroup;
  static_assert(row_block_fits<V>());
  Vec acc[V::kRowBlock * kPass];
  // Staged inputs: the pass's rows of the chunk (at most kChunkBytes, see chunk_cols), each with
  // room for the tail.
  constexpr int64_t kStagedSize =
      kStagedInputs<V> ? V::kChunkBytes / sizeof(X) + kPass * V::kStep : 1;
  [[maybe_unused]] alignas(64) X staged[kStagedSize];
  const int64_t cols = w.cols;
  const int64_t full = cols - cols % V::kStep;
  const int tail = static_cast<int>(cols - full);
  // The chunk's inputs, and with several groups its weights too, must stay in L1 across the pass;
  // beyond that, longer chunks keep the weight streams few and long for the prefetchers.
  const int64_t pass_rows = n_rows < kPass ? n_rows : kPass;
  const int64_t column_bytes = static_cast<int64_t>(sizeof(X)) * pass_rows +
                               (pass_rows > V::kMaxGroup ? 2 * V::kRowBlock : 0);
  int64_t chunk_cols = V::kChunkBytes / column_bytes / V::kStep * V::kStep;
  if (chunk_cols < V::kStep) chunk_cols = V::kStep;
  if constexpr (kStagedInputs<V>) {
    // The whole row staged once, when it fits, so that the far streams need no column chunks.
    if (by_hardware && n_rows == 1 && cols + V::kStep <= kStagedSize) {
      V::stage(x, cols, staged);
      far_streams<V>(w, row_begin, row_end, staged, 0, 1, out);
      return;
    }
  }
  for (int64_t r0 = row_begin; r0 < row_end; r0 += V::kRowBlock) {
    const int64_t rows = row_end - r0 < V::kRowBlock ? row_end - r0 : V::kRowBlock;
    for (int64_t n0 = 0; n0 < n_rows; n0 += kPass) {
      const int64_t ns = n_rows - n0 < kPass ? n_rows - n0 : kPass;
      for (int64_t c0 = 0;; c0 += chunk_cols) {
        const int64_t c1 = full - c0 < chunk_cols ? full : c0 + chunk_cols;
        const bool last = c1 == full;
        Chunk<X> chunk{nullptr, cols, nullptr, x_stride, c1 - c0, last ? tail : 0, c0 == 0};
        if constexpr (kStagedInputs<V>) {
          chunk.x_stride = chunk.len + V::kStep;
          for (int64_t j = 0; j < ns; ++j) {
            V::stage(x + (n0 + j) * x_stride + c0, chunk.len + chunk.tail,
                     staged + j * chunk.x_stride);
          }
        }
        for (int64_t j0 = 0; j0 < ns; j0 += V::kMaxGroup) {
          const int group = static_cast<int>(ns - j0 < V::kMaxGroup ? ns - j0 : V::kMaxGroup);
          const int64_t block_rows = V::rows_for(group);
          const bool prefetch = n0 == 0 && j0 == 0;
          const auto& fns = kBlocks<V>.fn[prefetch][group - 1];
          if constexpr (kStagedInputs<V>) {
            chunk.x = staged + j0 * chunk.x_stride;
          } else {
            chunk.x = x + (n0 + j0) * x_stride + c0;
          }
          for (int64_t i0 = 0; i0 < rows; i0 += block_rows) {
            const int64_t rr = rows - i0 < block_rows ? rows - i0 : block_rows;
            chunk.w = w.data + (r0 + i0) * cols + c0;
            fns[rr - 1](chunk, acc + i0 * kPass + j0, kPass);
          }
        }
        if (last) break;
      }
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < ns; ++j) {
          float sum = V::sum(acc[i * kPass + j]);
          float& y = out.y[(n0 + j) * out.y_stride + r0 + i];
          y = out.accumulate ? y + sum : sum;
        }
      }
    }
  }
}

}  // namespace md::kernels::blocked
