#include "models/common/int8_dense.h"

#include "base/error.h"
#include "kernels/int8_rows.h"

namespace md {

kernels::WeightMatrix quantized_int8(const kernels::WeightMatrix& m, const std::string& name,
                                     OwnedWeights& owned, ThreadPool* pool) {
  if (m.format != kernels::WeightFormat::kBf16) {
    fail("--dense-weights int8: {} is {}, not bf16", name, m.format_name());
  }
  if (m.cols % 8 != 0) {
    fail("--dense-weights int8: {} has {} columns, not a multiple of 8", name, m.cols);
  }
  const auto count = static_cast<std::size_t>(m.rows * m.cols);
  auto* q = static_cast<std::int8_t*>(owned_bytes(owned, count));
  auto* scales = static_cast<float*>(owned_bytes(owned, static_cast<std::size_t>(m.rows) * 4));
  if (!kernels::quantize_int8_rows(kernels::bf16_row(m, 0), m.rows, m.cols, q, scales, pool)) {
    fail("--dense-weights int8: {} holds a weight that is not finite", name);
  }
  return kernels::WeightMatrix::of(kernels::Int8RowsMatrix{q, scales, m.rows, m.cols});
}

}  // namespace md
