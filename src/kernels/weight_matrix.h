// One format-tagged weight matrix and its single tile entry: whatever the checkpoint format
// (bf16 tensors read in place, or GGUF blocks: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K,
// Q6_K; int8 with a scale per row, int8_rows.h; NVFP4 codes with e4m3 block scales and a global
// scale, nvfp4.h; MXFP4 codes with E8M0 group scales, mxfp4.h), a program's projection reads it
// through weight_tile(), and a waiting worker prefetches it through prefetch_rows(). Later
// formats (fp8) are further WeightFormat values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/ggml_type.h"
#include "base/thread_pool.h"
#include "kernels/bf16_matrix.h"
#include "kernels/gguf_matmul.h"
#include "kernels/int8_rows.h"
#include "kernels/matmul.h"
#include "kernels/mxfp4_matmul.h"
#include "kernels/nvfp4_matmul.h"

namespace md::kernels {

enum class WeightFormat : std::uint8_t { kBf16, kGguf, kInt8Rows, kNvfp4, kMxfp4 };

struct WeightMatrix {
  WeightFormat format = WeightFormat::kBf16;
  GgmlType gguf_type = GgmlType::kBF16;  // kGguf only
  const std::uint8_t* data = nullptr;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs
  std::size_t row_bytes = 0;
  MatmulInputs inputs = MatmulInputs::kF32;  // bf16_matrix.h: kBf16 for bf16, kQ8 for GGUF blocks
  const std::uint8_t* packed = nullptr;      // GgufMatrix::packed
  const float* row_scales = nullptr;         // kInt8Rows: one per row
  // kNvfp4: `data` holds the codes (row_bytes = cols / 2), these the e4m3 scales (cols / 16 a
  // row) and the matrix's global scale. kMxfp4: `data` the codes, these the E8M0 scales (cols /
  // 32 a row).
  const std::uint8_t* block_scales = nullptr;
  float global_scale = 1.0f;

  static WeightMatrix of(const Bf16Matrix& m);
  static WeightMatrix of(const GgufMatrix& m);
  static WeightMatrix of(const Int8RowsMatrix& m);
  static WeightMatrix of(const Nvfp4Matrix& m);
  static WeightMatrix of(const Mxfp4Matrix& m);
  // The kInt8Rows matrix as the int8 kernels take it.
  Int8RowsMatrix int8_rows() const {
    return {reinterpret_cast<const std::int8_t*>(data), row_scales, rows, cols};
  }
  // The kNvfp4 matrix as the NVFP4 kernels take it.
  Nvfp4Matrix nvfp4() const { return {data, block_scales, rows, cols, global_scale}; }
  // The kMxfp4 matrix as the MXFP4 kernels take it.
  Mxfp4Matrix mxfp4() const { return {data, block_scales, rows, cols}; }
  // The kGguf matrix as the GGUF kernels take it.
  GgufMatrix gguf() const { return {gguf_type, data, rows, cols, row_bytes, inputs, packed}; }

  const std::uint8_t* row(int64_t r) const {
    return data + static_cast<std::size_t>(r) * row_bytes;
  }
  // What a product reads of one row: its `cols` elements. Rows lie row_bytes apart; a GGUF column
  // view (a tensor-parallel rank's slice of a row-parallel matrix) keeps the whole rows' stride
  // but reads only its own blocks, fewer than row_bytes.
  std::size_t read_bytes_per_row() const;
  // What a product reads of rows [row_begin, row_end): with an NVFP4 or MXFP4 matrix's block
  // scales, with an int8 matrix's row scales.
  std::size_t bytes(int64_t row_begin, int64_t row_end) const {
    return static_cast<std::size_t>(row_end - row_begin) *
           (read_bytes_per_row() + side_bytes_per_row());
  }
  std::size_t side_bytes_per_row() const {
    if (format == WeightFormat::kNvfp4) return static_cast<std::size_t>(cols / 16);
    if (format == WeightFormat::kMxfp4) return static_cast<std::size_t>(cols / 32);
    if (format == WeightFormat::kInt8Rows) return sizeof(float);
    return 0;
  }
  // The format's name for listings: "bf16", "Q4_1", …
  std::string_view format_name() const;
};

// For output rows [row_begin, row_end) and input rows n in [0, n_rows): out.y[n·stride + r]
// (+)= Σ_c W[r][c] · x[n·x_stride + c], with the format's kernel and its reduction-order contract
// (matmul.h for bf16, gguf_matmul.h for GGUF blocks, int8_matmul.h for int8 rows,
// nvfp4_matmul.h for NVFP4, mxfp4_matmul.h for MXFP4).
void weight_tile(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out);

// Row `r` of a kBf16 matrix as bf16 values (row() gives bytes, which index wrongly as values).
inline const uint16_t* bf16_row(const WeightMatrix& w, int64_t r) {
  return reinterpret_cast<const uint16_t*>(w.row(r));
}

// y[n][r] = Σ_c W[r][c] · x[n][c] for `n_rows` input rows (x: [n_rows][W.cols], y:
// [n_rows][W.rows]), spread over `pool` (may be null): matmul() for bf16, gguf_matmul() for GGUF
// blocks, int8_matmul() for int8 rows, nvfp4_matmul() for NVFP4, mxfp4_matmul() for MXFP4, so a
// reference forward and a program's tiles compute the same bits.
void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool);

// A row-major f32 matrix [rows][cols] (GGUF's F32 layout) as a WeightMatrix, for weights a model
// derives at load in f32 (a transposed copy, a folded product).
WeightMatrix f32_weight_matrix(const float* data, int64_t rows, int64_t cols);

// Row `row` of W as f32 (an embedding lookup): bf16 widened, GGUF blocks, int8 rows, NVFP4 and
// MXFP4 dequantised. False for a block type dequantize_row does not handle (loaders refuse those
// before anything runs).
[[nodiscard]] bool row_to_f32(const WeightMatrix& w, int64_t row, float* out);

// Asks the memory system for the cache lines of bytes [from, to) of what a product reads of rows
// [row_begin, row_end) (offsets within bytes(row_begin, row_end), so that a waiting worker can
// issue a few lines at a time): a column view's own blocks of each row, not the rows' other
// blocks (another rank's).
void prefetch_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, std::size_t from,
                   std::size_t to);

}  // namespace md::kernels
