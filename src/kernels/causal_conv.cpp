#include "kernels/causal_conv.h"

namespace md::kernels {

void causal_conv(float* state, const float* w, int64_t channels, int64_t kernel, const float* x,
                 int64_t rows, float* y, Activation act) {
  causal_conv_strided(state, w, channels, kernel, x, channels, rows, y, channels, act);
}

void causal_conv_strided(float* state, const float* w, int64_t channels, int64_t kernel,
                         const float* x, int64_t x_stride, int64_t rows, float* y, int64_t y_stride,
                         Activation act) {
  const int64_t history = kernel - 1;
  for (int64_t c = 0; c < channels; ++c) {
    float* past = state + c * history;
    // Position i of the channel's window: the state's column i, then the rows' inputs.
    auto window = [&](int64_t i) {
      return i < history ? past[i] : x[(i - history) * x_stride + c];
    };
    const float* taps = w + c * kernel;
    for (int64_t t = 0; t < rows; ++t) {
      float acc = 0;
      for (int64_t j = 0; j < kernel; ++j) acc += taps[j] * window(t + j);
      y[t * y_stride + c] = acc;
    }
    // The last kernel-1 window positions: each read (position rows + j > j) before it is
    // overwritten, in increasing j.
    for (int64_t j = 0; j < history; ++j) past[j] = window(rows + j);
  }
  for (int64_t t = 0; t < rows; ++t) activate_all(act, y + t * y_stride, channels);
}

}  // namespace md::kernels
