#include "models/common/gguf_binder.h"

#include "base/error.h"
#include "kernels/gguf_dequant.h"

namespace md {

namespace {

// The tensor `name`, shaped [rows][cols] (ggml order: cols first), or a one-dimensional tensor of
// `cols` when rows is 1; an md::Error naming it otherwise.
const GgufTensor& shaped_tensor(const GgufFile& file, const std::string& name, int64_t rows,
                                int64_t cols, std::string_view family) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing ({} needs it)", file.path(), name, family);
  bool vector_ok = rows == 1 && t->dims.size() == 1 && t->dims[0] == cols;
  bool matrix_ok = t->dims.size() == 2 && t->dims[0] == cols && t->dims[1] == rows;
  if (!vector_ok && !matrix_ok) {
    fail("{}: tensor '{}' is {} but the metadata implies [{}, {}] (ggml order)", file.path(), name,
         t->describe(), cols, rows);
  }
  return *t;
}

[[noreturn]] void unreadable(const GgufFile& file, const GgufTensor& t) {
  fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), t.name,
       ggml_type_name(t.type));
}

// Every row of a [rows][cols] tensor as f32.
std::vector<float> dequantized(const GgufFile& file, const GgufTensor& t, int64_t rows,
                               int64_t cols) {
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  const std::size_t row_bytes = t.nbytes / static_cast<std::size_t>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (!kernels::dequantize_row(t.type, t.data + static_cast<std::size_t>(r) * row_bytes,
                                 values.data() + r * cols, cols)) {
      unreadable(file, t);
    }
  }
  return values;
}

}  // namespace

kernels::GgufMatrix bind_gguf_matrix(const GgufFile& file, const std::string& name, int64_t rows,
                                     int64_t cols, std::string_view family) {
  const GgufTensor& t = shaped_tensor(file, name, rows, cols, family);
  kernels::GgufMatrix m{t.type, t.data, rows, cols, t.nbytes / static_cast<std::size_t>(rows)};
  // Every matrix a model binds is either multiplied (GGUF GEMV kernels) or dequantised row by
  // row (norms, embeddings): both read the same formats.
  if (!kernels::can_dequantize(t.type) || !kernels::gguf_matmul_accepts(m)) unreadable(file, t);
  return m;
}

std::vector<kernels::GgufMatrix> bind_gguf_stack(const GgufFile& file, const std::string& name,
                                                 int64_t count, int64_t rows, int64_t cols,
                                                 std::string_view family) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing ({} needs it)", file.path(), name, family);
  if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != count) {
    fail("{}: tensor '{}' is {} but the metadata implies [{}, {}, {}] (ggml order)", file.path(),
         name, t->describe(), cols, rows, count);
  }
  const std::size_t row_bytes = t->nbytes / static_cast<std::size_t>(count * rows);
  std::vector<kernels::GgufMatrix> stack;
  for (int64_t e = 0; e < count; ++e) {
    const std::uint8_t* data = t->data + static_cast<std::size_t>(e * rows) * row_bytes;
    stack.push_back({t->type, data, rows, cols, row_bytes});
    if (!kernels::can_dequantize(t->type) || !kernels::gguf_matmul_accepts(stack.back()))
      unreadable(file, *t);
  }
  return stack;
}

std::vector<float> bind_gguf_vector(const GgufFile& file, const std::string& name, int64_t n,
                                    std::string_view family) {
  bind_gguf_matrix(file, name, 1, n, family);  // a vector passes a matrix's format checks too
  return dequantized(file, *file.tensor(name), 1, n);
}

std::vector<float> bind_gguf_table(const GgufFile& file, const std::string& name, int64_t rows,
                                   int64_t cols, std::string_view family) {
  return dequantized(file, shaped_tensor(file, name, rows, cols, family), rows, cols);
}

}  // namespace md
