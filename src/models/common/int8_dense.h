// Dense matrices quantised at load to int8 with a scale per output row (kernels/int8_rows.h), for
// families that offer `--dense-weights int8`.
#pragma once

#include "base/thread_pool.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"

namespace md {

// The int8 form of a bf16 matrix, its codes and scales appended to `owned`. Throws md::Error
// naming `name` for a matrix that is not bf16, whose width is not a multiple of 8 (the int8
// kernels' lanes) or that holds a NaN or an infinity.
kernels::WeightMatrix quantized_int8(const kernels::WeightMatrix& m, const std::string& name,
                                     OwnedWeights& owned, ThreadPool* pool);

}  // namespace md
