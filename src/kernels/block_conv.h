// A dynamic grouped causal conv along a draft block (DFlash2, qwen38-dflash2.md §11.4): each block
// row mixes itself with the rows before it, with per-channel base taps plus per-group taps
// projected from the sub-layer's normalised input. It never touches context positions.
#pragma once

#include <cstdint>

namespace md::kernels {

struct BlockConvShape {
  int64_t hidden = 0;
  int64_t taps = 0;        // conv_kernel_size
  int64_t group_size = 0;  // channels per dynamic coefficient (contiguous)

  int64_t groups() const { return hidden / group_size; }
  // Dynamic coefficients of one row: [2 sides][taps][groups].
  int64_t coefficients() const { return 2 * taps * groups(); }
};

// out[t][c] = Σ_tap (base[side][tap][c] + coefficients[t][side][tap][c / group_size]) ·
// in[t − tap][c], where rows before 0 count as zero (the anchor row has no predecessor).
// Summed in f32 over taps in order. `out` must not alias `in`. base_kernel: bf16
// [2 sides][taps][hidden]; coefficients: f32 [rows][2][taps][groups].
void apply_block_conv(const uint16_t* base_kernel, const float* coefficients, int side,
                      const BlockConvShape& shape, const float* in, int64_t rows, float* out);

// The same for channels [channel_begin, channel_end) of every row only (out's other channels are
// left alone): channels are independent, so a fused program splits the conv into channel ranges
// whose results are bitwise those of the whole.
void apply_block_conv_channels(const uint16_t* base_kernel, const float* coefficients, int side,
                               const BlockConvShape& shape, const float* in, int64_t rows,
                               int64_t channel_begin, int64_t channel_end, float* out);

}  // namespace md::kernels
