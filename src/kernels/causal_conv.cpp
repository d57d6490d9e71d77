#include "kernels/causal_conv.h"

#include <vector>

#include "kernels/activations.h"

namespace md::kernels {

void causal_conv_silu(float* state, const float* w, int64_t channels, int64_t kernel,
                      const float* x, int64_t rows, float* y) {
  int64_t history = kernel - 1;
  std::vector<float> window(static_cast<std::size_t>(history + rows));
  for (int64_t c = 0; c < channels; ++c) {
    float* past = state + c * history;
    for (int64_t j = 0; j < history; ++j) window[static_cast<std::size_t>(j)] = past[j];
    for (int64_t t = 0; t < rows; ++t)
      window[static_cast<std::size_t>(history + t)] = x[t * channels + c];
    const float* taps = w + c * kernel;
    for (int64_t t = 0; t < rows; ++t) {
      float acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        acc += taps[j] * window[static_cast<std::size_t>(t + j)];
      }
      y[t * channels + c] = silu(acc);
    }
    for (int64_t j = 0; j < history; ++j) past[j] = window[static_cast<std::size_t>(rows + j)];
  }
}

}  // namespace md::kernels
