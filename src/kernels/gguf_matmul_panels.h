// The many-row loop nest of the vector paths of kernels/gguf_matmul.h (a prefill chunk: more
// activation rows than one register group). The register-blocked GEMV of gguf_matmul_blocked.h
// unpacks every weight block again for each group of activation rows and keeps one weight row
// against eight activation rows, so a chunk of 256 rows pays the unpacking 32 times and reads
// the activations once per weight row; measured on SmolLM2's prefill it ran at ≈ 30 % of the
// machine's f32 fma peak. Here a panel of weight rows is unpacked once into f32 scratch (the same
// values, bit for bit, that the GEMV unpacks into its registers) and the dense blocks of
// dense_panel.h run over it.
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

#include "kernels/dense_panel.h"
#include "kernels/gguf_matmul.h"
#include "kernels/gguf_matmul_blocked.h"

namespace md::kernels::gguf_blocked {

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

// Whether panels() takes a product of `n_rows` activation rows with w.
template <class V>
bool panels_apply(const GgufMatrix& w, int64_t n_rows) {
  return n_rows > V::kMaxGroup && w.cols % kGroupElems == 0;
}

// Output rows [row_begin, row_end) for every activation row: panels of weight rows unpacked once,
// then for each group of activation rows, dense blocks over the panel (dense_panel.h).
template <class V, class F>
void panels(const GgufMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
            int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  dense::panels<V, 2, V::kPanelRows, V::kPanelGroup>(
      row_begin, row_end, w.cols, x, x_stride, n_rows, out.y, out.y_stride, out.accumulate,
      [&](int64_t r, float* dst) { unpack_row<V, F>(w, r, dst); });
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
