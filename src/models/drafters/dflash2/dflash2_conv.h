// DFlash2's dynamic grouped causal conv along the draft block (qwen38-dflash2.md §11.4): the
// projection of its dynamic coefficients here; the conv itself is the shared kernel
// (kernels/block_conv.h).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/block_conv.h"
#include "models/drafters/dflash2/dflash2_weights.h"

namespace md::dflash2 {

using kernels::apply_block_conv;
using kernels::apply_block_conv_channels;
using kernels::BlockConvShape;

// The dynamic coefficients of every row: coefficients[t] = kernel_projection · x[t]
// ([rows][2][taps][groups], f32, not rounded). prepare() uses side 0, finish() side 1: the
// coefficients come from the sub-layer's input and are reused for its output.
void project_block_conv(const DFlash2ConvWeights& w, const float* x, int64_t rows,
                        float* coefficients, ThreadPool* pool);

}  // namespace md::dflash2
