#include "models/drafters/dflash2/dflash2_conv.h"

#include <algorithm>

#include "base/dtype.h"
#include "kernels/matmul.h"

namespace md::dflash2 {

void project_block_conv(const DFlash2ConvWeights& w, const float* x, int64_t rows,
                        float* coefficients, ThreadPool* pool) {
  kernels::matmul(w.kernel_projection, x, rows, coefficients, pool);
}

}  // namespace md::dflash2
