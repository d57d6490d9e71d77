// Depthwise causal convolution with a rolling state, followed by an activation (SiLU in every
// released model): the short convolution of a Gated DeltaNet layer (spec §5 step 2, §8.2).
#pragma once

#include <cstdint>

#include "kernels/activations.h"

namespace md::kernels {

// For each channel c and row t: y[t][c] = act(Σ_j w[c][j] · X[c][t+j]) where X is the channel's
// `kernel-1` previous raw inputs (state, oldest first) followed by x[0..rows), summed in j order.
// state: [channels][kernel-1] f32, updated to the last kernel-1 raw inputs.
// w: f32 [channels][kernel] (conv1d.weight [C, 1, K], widened at load: exact for bf16
// checkpoints, as llama.cpp's GGUF stores it). x, y: [rows][channels]. Allocates nothing.
void causal_conv(float* state, const float* w, int64_t channels, int64_t kernel, const float* x,
                 int64_t rows, float* y, Activation act = Activation::kSilu);
// The same over channels that are a slice of wider rows: x's rows are x_stride floats apart, y's
// y_stride (a key head's channels of a prefill chunk). Each channel's result is bitwise the one
// above.
void causal_conv_strided(float* state, const float* w, int64_t channels, int64_t kernel,
                         const float* x, int64_t x_stride, int64_t rows, float* y, int64_t y_stride,
                         Activation act = Activation::kSilu);

}  // namespace md::kernels
