// How the 8-lane weight kernels (NVFP4, int8 rows) walk a tile of output rows: one activation row
// runs `kOutputs` output rows side by side (independent fma chains), more activation rows go one
// output row at a time with up to `kRows` of them sharing each decoded weight. Which rows share a
// call never changes a result (each output is its own documented sum).
#pragma once

#include <algorithm>
#include <cstdint>

namespace md::kernels {

// by_outputs(r): outputs [r, r + kOutputs) of activation row 0; by_rows(r, n0, count): output r
// of activation rows [n0, n0 + count).
template <int64_t kOutputs, int64_t kRows, typename ByOutputs, typename ByRows>
inline void walk_tile(int64_t row_begin, int64_t row_end, int64_t n_rows,
                      const ByOutputs& by_outputs, const ByRows& by_rows) {
  int64_t r = row_begin;
  if (n_rows == 1) {
    for (; r + kOutputs <= row_end; r += kOutputs) by_outputs(r);
  }
  for (; r < row_end; ++r) {
    for (int64_t n0 = 0; n0 < n_rows; n0 += kRows) by_rows(r, n0, std::min(kRows, n_rows - n0));
  }
}

}  // namespace md::kernels
