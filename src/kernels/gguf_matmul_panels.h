// The many-row loop nest of the vector paths of kernels/gguf_matmul.h (a prefill chunk: more
// activation rows than one register group). The register-blocked GEMV of gguf_matmul_blocked.h
// unpacks every weight block again for each group of activation rows and keeps one weight row
// against eight activation rows, so a chunk of 256 rows pays the unpacking 32 times and reads
// the activations once per weight row; measured on SmolLM2's prefill it ran at ≈ 30 % of the
// machine's f32 fma peak. Here a panel of weight rows is unpacked once into f32 scratch (the same
// values, bit for bit, that the GEMV unpacks into its registers) and a dense block of R weight
// rows × N activation rows runs over it: each activation vector loaded serves R rows and each
// weight vector N rows.
//
// The reduction order is the contract of gguf_matmul_blocked.h unchanged (column c to lane
// c % kLanes of accumulator (c / kLanes) % 2, each lane in increasing column order, one fma each,
// then sum(acc0 + acc1)), so a row's result is bitwise the one the GEMV gives it alone, and
// prefill ≡ decode still holds bit for bit. Only rows whose length is a whole number of 32-column
// groups come here (every block format; plain formats with a tail stay on the GEMV).
//
// Traits V (besides gguf_matmul_blocked.h's): V::store(p, v), and the dense block's shape
// V::kPanelRows (R) × V::kPanelGroup (N), 2·R·N accumulators of the register file.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <utility>

#include "kernels/gguf_matmul.h"
#include "kernels/gguf_matmul_blocked.h"

namespace md::kernels::gguf_blocked {

// A panel of dequantised weight rows of about this many bytes stays in L2 while every group of
// activation rows passes over it.
constexpr int64_t kPanelBytes = 64 * 1024;

// Sums of R dense f32 weight rows (w, w_stride apart) × N activation rows (x, x_stride apart)
// over `cols` columns (a multiple of 32): sums[i * N + j].
template <class V, int R, int N>
void dense_block(const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t cols,
                 float* sums) {
  using Vec = typename V::Vec;
  Vec acc[R][N][2];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[i][j][0] = acc[i][j][1] = V::zero();
  }
  for (int64_t c = 0; c < cols; c += 2 * V::kLanes) {
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const int64_t at = c + v * V::kLanes;
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
        for (int i = 0; i < R; ++i) acc[i][j][v] = V::fma(wv[i], xv, acc[i][j][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) sums[i * N + j] = V::sum(V::add(acc[i][j][0], acc[i][j][1]));
  }
}

using DenseBlockFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*);

// fn[N - 1][R - 1]: the ragged ends of a panel and of the activation rows take smaller blocks.
template <class V>
struct DenseBlockTable {
  DenseBlockFn fn[V::kPanelGroup][V::kPanelRows];
};

template <class V, int... I>
constexpr DenseBlockTable<V> make_dense_blocks(std::integer_sequence<int, I...>) {
  DenseBlockTable<V> table{};
  auto fill = [&]<int N, int R>() { table.fn[N - 1][R - 1] = dense_block<V, R, N>; };
  (fill.template operator()<I / V::kPanelRows + 1, I % V::kPanelRows + 1>(), ...);
  return table;
}

template <class V>
inline constexpr DenseBlockTable<V> kDenseBlocks =
    make_dense_blocks<V>(std::make_integer_sequence<int, V::kPanelGroup * V::kPanelRows>());

// Row `r` of w dequantised into dst[0, w.cols): each group of 32 as F::group unpacks it.
template <class V, class F>
void unpack_row(const GgufMatrix& w, int64_t r, float* dst) {
  using Vec = typename V::Vec;
  constexpr int kVecs = kGroupElems / V::kLanes;
  const std::uint8_t* row = w.row(r);
  const int64_t blocks = w.cols / F::kBlockElems;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::uint8_t* at[1] = {row + b * F::kBlockBytes};
    typename F::Scales scales[1];
    F::template open<1>(at, scales);
#pragma GCC unroll 8
    for (int g = 0; g < F::kBlockElems / kGroupElems; ++g) {
      Vec wv[kVecs];
      F::group(at[0], scales[0], g, wv);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        V::store(dst + b * F::kBlockElems + g * kGroupElems + v * V::kLanes, wv[v]);
      }
    }
  }
}

// A thread's unpacked panel, 64-byte aligned (an unaligned 64-byte load costs two: measured, fma
// with L1 operands ran at half speed), grown and never shrunk.
class PanelScratch {
 public:
  float* floats(int64_t n) {
    if (n > size_) {
      data_.reset(new (std::align_val_t{64}) float[static_cast<std::size_t>(n)]);
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct AlignedDelete {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<float[], AlignedDelete> data_;
  int64_t size_ = 0;
};

// Whether panels() takes a product of `n_rows` activation rows with w.
template <class V>
bool panels_apply(const GgufMatrix& w, int64_t n_rows) {
  return n_rows > V::kMaxGroup && w.cols % kGroupElems == 0;
}

// Output rows [row_begin, row_end) for every activation row: panels of weight rows unpacked once,
// then for each group of activation rows, dense blocks over the panel.
template <class V, class F>
void panels(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
            int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  constexpr int kR = V::kPanelRows, kN = V::kPanelGroup;
  const int64_t cols = w.cols;
  int64_t panel = kPanelBytes / (cols * static_cast<int64_t>(sizeof(float))) / kR * kR;
  if (panel < kR) panel = kR;
  thread_local PanelScratch scratch;
  float* const unpacked = scratch.floats(panel * cols);
  float sums[kR * kN];
  for (int64_t p0 = row_begin; p0 < row_end; p0 += panel) {
    const int64_t p1 = row_end - p0 < panel ? row_end : p0 + panel;
    for (int64_t r = p0; r < p1; ++r) unpack_row<V, F>(w, r, unpacked + (r - p0) * cols);
    for (int64_t n0 = 0; n0 < n_rows; n0 += kN) {
      const int group = static_cast<int>(n_rows - n0 < kN ? n_rows - n0 : kN);
      for (int64_t i0 = p0; i0 < p1; i0 += kR) {
        const int rows = static_cast<int>(p1 - i0 < kR ? p1 - i0 : kR);
        kDenseBlocks<V>.fn[group - 1][rows - 1](unpacked + (i0 - p0) * cols, cols,
                                                x + n0 * x_stride, x_stride, cols, sums);
        for (int i = 0; i < rows; ++i) {
          for (int j = 0; j < group; ++j) {
            float& y = out.y[(n0 + j) * out.y_stride + i0 + i];
            y = out.accumulate ? y + sums[i * group + j] : sums[i * group + j];
          }
        }
      }
    }
  }
}

// The tile for any number of activation rows: panels for a prefill chunk, the GEMV otherwise.
template <class V, class F>
void any_rows(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
              int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  if (panels_apply<V>(w, n_rows)) {
    panels<V, F>(w, row_begin, row_end, x, x_stride, n_rows, out);
  } else {
    tile<V, F>(w, row_begin, row_end, x, x_stride, n_rows, out);
  }
}

// The tile function of each GGUF type for one instruction set: `Formats` names that ISA's format
// structs (Formats::Q4_0 ... Formats::F16). Null for types the kernels do not handle (BF16
// goes to the bf16 kernels of matmul.h: one bf16 path whatever the container).
template <class V, class Formats>
GgufTileFn tile_for(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return any_rows<V, typename Formats::Q4_0>;
    case GgmlType::kQ4_1:
      return any_rows<V, typename Formats::Q4_1>;
    case GgmlType::kQ8_0:
      return any_rows<V, typename Formats::Q8_0>;
    case GgmlType::kQ5_0:
      return any_rows<V, typename Formats::Q5_0>;
    case GgmlType::kQ4_K:
      return any_rows<V, typename Formats::Q4_K>;
    case GgmlType::kQ5_K:
      return any_rows<V, typename Formats::Q5_K>;
    case GgmlType::kQ6_K:
      return any_rows<V, typename Formats::Q6_K>;
    case GgmlType::kF32:
      return any_rows<V, typename Formats::F32>;
    case GgmlType::kF16:
      return any_rows<V, typename Formats::F16>;
    default:
      return nullptr;
  }
}

}  // namespace md::kernels::gguf_blocked
