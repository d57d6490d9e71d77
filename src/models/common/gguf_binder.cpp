#include "models/common/gguf_binder.h"

#include "base/error.h"
#include "kernels/gguf_dequant.h"

namespace md {

kernels::GgufMatrix bind_gguf_matrix(const GgufFile& file, const std::string& name, int64_t rows,
                                     int64_t cols, std::string_view family) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing ({} needs it)", file.path(), name, family);
  // Vectors are stored with one dimension, matrices with two (ggml order: columns first).
  bool vector_ok = rows == 1 && t->dims.size() == 1 && t->dims[0] == cols;
  bool matrix_ok = t->dims.size() == 2 && t->dims[0] == cols && t->dims[1] == rows;
  if (!vector_ok && !matrix_ok) {
    fail("{}: tensor '{}' is {} but the metadata implies [{}, {}] (ggml order)", file.path(), name,
         t->describe(), cols, rows);
  }
  kernels::GgufMatrix m{t->type, t->data, rows, cols, t->nbytes / static_cast<std::size_t>(rows)};
  // Every matrix a model binds is either multiplied (GGUF GEMV kernels) or dequantised row by
  // row (norms, embeddings): both read the same formats.
  if (!kernels::can_dequantize(t->type) || !kernels::gguf_matmul_accepts(m)) {
    fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), name,
         ggml_type_name(t->type));
  }
  return m;
}

std::vector<float> bind_gguf_vector(const GgufFile& file, const std::string& name, int64_t n,
                                    std::string_view family) {
  return bind_gguf_table(file, name, 1, n, family);
}

std::vector<float> bind_gguf_table(const GgufFile& file, const std::string& name, int64_t rows,
                                   int64_t cols, std::string_view family) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr) fail("{}: tensor '{}' is missing ({} needs it)", file.path(), name, family);
  bool vector_ok = rows == 1 && t->dims.size() == 1 && t->dims[0] == cols;
  bool table_ok = t->dims.size() == 2 && t->dims[0] == cols && t->dims[1] == rows;
  if (!vector_ok && !table_ok) {
    fail("{}: tensor '{}' is {} but the metadata implies [{}, {}] (ggml order)", file.path(), name,
         t->describe(), cols, rows);
  }
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  const std::size_t row_bytes = t->nbytes / static_cast<std::size_t>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (!kernels::dequantize_row(t->type, t->data + static_cast<std::size_t>(r) * row_bytes,
                                 values.data() + r * cols, cols)) {
      fail("{}: tensor '{}' is {}, a format megadecode cannot read yet", file.path(), name,
           ggml_type_name(t->type));
    }
  }
  return values;
}

}  // namespace md
