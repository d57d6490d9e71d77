#include "models/llama/llama_math.h"

#include <cmath>

namespace md::llama {

void rms_norm_rows(const float* x, const std::vector<float>& w, int64_t rows, int64_t width,
                   float eps, float* y) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* in = x + t * width;
    double sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += static_cast<double>(in[i]) * in[i];
    auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(width) + eps));
    for (int64_t i = 0; i < width; ++i) {
      y[t * width + i] = in[i] * inv * w[static_cast<std::size_t>(i)];
    }
  }
}

std::vector<float> rope_inv_freq(int64_t head_dim, double theta) {
  std::vector<float> inv_freq;
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    inv_freq.push_back(1.0f / static_cast<float>(std::pow(theta, static_cast<double>(exponent))));
  }
  return inv_freq;
}

void rope_angles(int64_t position, const std::vector<float>& inv_freq, float* cos_values,
                 float* sin_values) {
  for (std::size_t j = 0; j < inv_freq.size(); ++j) {
    float angle = static_cast<float>(position) * inv_freq[j];
    cos_values[j] = std::cos(angle);
    sin_values[j] = std::sin(angle);
  }
}

void rope_adjacent(float* x, int64_t head_dim, const float* cos_values, const float* sin_values) {
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    float c = cos_values[j], s = sin_values[j];
    float a = x[2 * j], b = x[2 * j + 1];
    x[2 * j] = a * c - b * s;
    x[2 * j + 1] = b * c + a * s;
  }
}

}  // namespace md::llama
