#include "kernels/weight_matrix.h"

#include <algorithm>

#include "base/dtype.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul_q8.h"
#include "kernels/gguf_q8_packing.h"
#include "kernels/int8_matmul.h"
#include "kernels/mxfp4.h"
#include "kernels/nvfp4.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace md::kernels {

namespace {

Bf16Matrix bf16_of(const WeightMatrix& w) {
  return {reinterpret_cast<const uint16_t*>(w.data), w.rows, w.cols, w.inputs};
}

}  // namespace

WeightMatrix WeightMatrix::of(const Bf16Matrix& m) {
  return {WeightFormat::kBf16,
          GgmlType::kBF16,
          reinterpret_cast<const std::uint8_t*>(m.data),
          m.rows,
          m.cols,
          static_cast<std::size_t>(m.cols) * 2,
          m.inputs};
}

WeightMatrix WeightMatrix::of(const GgufMatrix& m) {
  if (m.type == GgmlType::kBF16) return of(bf16_view(m));  // one bf16 path
  return {WeightFormat::kGguf, m.type, m.data, m.rows, m.cols, m.row_bytes, m.inputs, m.packed};
}

WeightMatrix WeightMatrix::of(const Int8RowsMatrix& m) {
  WeightMatrix w;
  w.format = WeightFormat::kInt8Rows;
  w.data = reinterpret_cast<const std::uint8_t*>(m.q);
  w.rows = m.rows;
  w.cols = m.cols;
  w.row_bytes = static_cast<std::size_t>(m.cols);
  w.row_scales = m.scales;
  return w;
}

WeightMatrix WeightMatrix::of(const Nvfp4Matrix& m) {
  WeightMatrix w;
  w.format = WeightFormat::kNvfp4;
  w.data = m.codes;
  w.rows = m.rows;
  w.cols = m.cols;
  w.row_bytes = static_cast<std::size_t>(m.cols / 2);
  w.block_scales = m.scales;
  w.global_scale = m.global_scale;
  return w;
}

WeightMatrix WeightMatrix::of(const Mxfp4Matrix& m) {
  WeightMatrix w;
  w.format = WeightFormat::kMxfp4;
  w.data = m.codes;
  w.rows = m.rows;
  w.cols = m.cols;
  w.row_bytes = static_cast<std::size_t>(m.cols / 2);
  w.block_scales = m.scales;
  return w;
}

WeightMatrix f32_weight_matrix(const float* data, int64_t rows, int64_t cols) {
  GgufMatrix m;
  m.type = GgmlType::kF32;
  m.data = reinterpret_cast<const std::uint8_t*>(data);
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
  return WeightMatrix::of(m);
}

std::size_t WeightMatrix::read_bytes_per_row() const {
  if (format != WeightFormat::kGguf) return row_bytes;
  const GgmlTypeInfo& info = ggml_type_info(gguf_type);
  return static_cast<std::size_t>(cols / info.block_elems) * info.block_bytes;
}

std::string_view WeightMatrix::format_name() const {
  if (format == WeightFormat::kInt8Rows) return "int8";
  if (format == WeightFormat::kNvfp4) return "NVFP4";
  if (format == WeightFormat::kMxfp4) return "MXFP4";
  if (format == WeightFormat::kBf16)
    return inputs == MatmulInputs::kBf16 ? "bf16 (bf16 inputs)" : "bf16";
  if (inputs == MatmulInputs::kQ8 && gguf_q8_supports(gguf_type)) {
    switch (gguf_type) {  // string_view of static storage, as the plain names
      case GgmlType::kQ4_0:
        return "Q4_0 (q8 inputs)";
      case GgmlType::kQ4_1:
        return "Q4_1 (q8 inputs)";
      default:
        return "Q8_0 (q8 inputs)";
    }
  }
  return ggml_type_info(gguf_type).name;
}

void weight_tile(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t x_stride, int64_t n_rows, const MatmulOut& out) {
  if (w.format == WeightFormat::kBf16) {
    matmul_tile(bf16_of(w), row_begin, row_end, x, x_stride, n_rows, out);
  } else if (w.format == WeightFormat::kInt8Rows) {
    int8_matmul_tile(w.int8_rows(), row_begin, row_end, x, x_stride, n_rows, out);
  } else if (w.format == WeightFormat::kNvfp4) {
    nvfp4_matmul_tile(w.nvfp4(), row_begin, row_end, x, x_stride, n_rows, out);
  } else if (w.format == WeightFormat::kMxfp4) {
    mxfp4_matmul_tile(w.mxfp4(), row_begin, row_end, x, x_stride, n_rows, out);
  } else {
    gguf_matmul_tile(w.gguf(), row_begin, row_end, x, x_stride, n_rows, out);
  }
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, ThreadPool* pool) {
  if (w.format == WeightFormat::kBf16) {
    matmul(bf16_of(w), x, n_rows, y, pool);
  } else if (w.format == WeightFormat::kInt8Rows) {
    int8_matmul(w.int8_rows(), x, n_rows, y, pool);
  } else if (w.format == WeightFormat::kNvfp4) {
    nvfp4_matmul(w.nvfp4(), x, n_rows, y, pool);
  } else if (w.format == WeightFormat::kMxfp4) {
    mxfp4_matmul(w.mxfp4(), x, n_rows, y, pool);
  } else {
    gguf_matmul(w.gguf(), x, n_rows, y, pool);
  }
}

bool row_to_f32(const WeightMatrix& w, int64_t row, float* out) {
  const std::uint8_t* source = w.row(row);
  if (w.format == WeightFormat::kGguf) return dequantize_row(w.gguf_type, source, out, w.cols);
  if (w.format == WeightFormat::kInt8Rows) {
    dequantize_int8_row(w.int8_rows(), row, out);
    return true;
  }
  if (w.format == WeightFormat::kNvfp4) {
    const Nvfp4Matrix m = w.nvfp4();
    dequantize_nvfp4_row(m.row_codes(row), m.row_scales(row), w.cols, w.global_scale, out);
    return true;
  }
  if (w.format == WeightFormat::kMxfp4) {
    const Mxfp4Matrix m = w.mxfp4();
    dequantize_mxfp4_row(m.row_codes(row), m.row_scales(row), w.cols, out);
    return true;
  }
  const auto* e = reinterpret_cast<const uint16_t*>(source);
  for (int64_t d = 0; d < w.cols; ++d) out[d] = bf16_to_f32(e[d]);
  return true;
}

void prefetch_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, std::size_t from,
                   std::size_t to) {
#if defined(__x86_64__)
  // The rows of a tile are one run of bytes in every format (a column view's read parts one run
  // of row_bytes-apart pieces), then (NVFP4, MXFP4, int8 rows) one run of the rows' scales.
  // Packed rows (the q8 path's groups of eight, gguf_q8_packing.h; dense even for a view) take
  // as many bytes, counted from the tile's first row within its group.
  const std::uint8_t* base = w.row(row_begin);
  const std::size_t read = w.read_bytes_per_row();
  std::size_t end = static_cast<std::size_t>(row_end - row_begin) * read;
  if (to > end && w.side_bytes_per_row() > 0) {
    const auto* side = w.format == WeightFormat::kInt8Rows
                           ? reinterpret_cast<const std::uint8_t*>(w.row_scales)
                           : w.block_scales;
    side += static_cast<std::size_t>(row_begin) * w.side_bytes_per_row();
    const std::size_t side_end = w.bytes(row_begin, row_end) - end;
    for (std::size_t at = (from > end ? from - end : 0) & ~std::size_t{63};
         at < std::min(to - end, side_end); at += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(side + at), _MM_HINT_T1);
    }
  }
  const bool packed = w.packed != nullptr && w.inputs == MatmulInputs::kQ8;
  if (packed) {
    base = w.packed + static_cast<std::size_t>(row_begin / kQ8PackRows) * read * kQ8PackRows;
    const std::size_t skip = static_cast<std::size_t>(row_begin % kQ8PackRows) * read;
    from += skip, to += skip, end += skip;
  }
  to = std::min(to, end);
  if (packed || read == w.row_bytes) {
    for (std::size_t at = from & ~std::size_t{63}; at < to; at += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(base + at), _MM_HINT_T1);
    }
    return;
  }
  // A column view: offset `at` of the read bytes is byte at % read of row at / read.
  for (std::size_t at = from & ~std::size_t{63}; at < to; at += 64) {
    const std::uint8_t* line = base + (at / read) * w.row_bytes + at % read;
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  }
#else
  (void)w, (void)row_begin, (void)row_end, (void)from, (void)to;
#endif
}

}  // namespace md::kernels
