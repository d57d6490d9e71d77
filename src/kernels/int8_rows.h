// Dense weights as int8 with one f32 scale per output row (muse-spark-nvfp4.md §7, the seed's
// "int8 per output column" of the [in, out] layout): w[r][c] ≈ scale[r] · q[r][c]. Half the bytes
// of bf16; the relative error per matrix is about 1 %.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace md::kernels {

// [rows][cols] int8 codes, row r at q + r · cols, and its scale at scales[r].
struct Int8RowsMatrix {
  const std::int8_t* q = nullptr;
  const float* scales = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  const std::int8_t* row(int64_t r) const { return q + r * cols; }
};

// The quantiser of §7, bit for bit: per row, s = f32(amax · f32(1/127)) (1 for an all-zero row)
// and q = clip(rint(w · f32(1/s)), −127, 127), rounding half to even; the reciprocal is
// multiplied, never divided by. `bf16` is [rows][cols]; `q` and `scales` are the caller's
// ([rows][cols], [rows]). Rows are split over `pool` (may be null). False when a weight is not
// finite (no int8 code stands for it; the caller names the matrix).
[[nodiscard]] bool quantize_int8_rows(const std::uint16_t* bf16, int64_t rows, int64_t cols,
                                      std::int8_t* q, float* scales, ThreadPool* pool);

// Row r as f32: scale · q, one rounding per weight.
void dequantize_int8_row(const Int8RowsMatrix& m, int64_t r, float* out);

}  // namespace md::kernels
