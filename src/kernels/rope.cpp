#include "kernels/rope.h"

#include <cmath>

namespace md::kernels {

Rope::Rope(int64_t rotary_dim, double theta, RopePairing pairing)
    : rotary_dim_(rotary_dim), pairing_(pairing) {
  int64_t half = rotary_dim / 2;
  inv_freq_.resize(static_cast<std::size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    // Computed like torch: 1 / θ^(2j/D) with the exponent in f32.
    float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv_freq_[static_cast<std::size_t>(j)] =
        1.0f / static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
  }
}

void Rope::angles(int64_t position, float* cos_out, float* sin_out) const {
  float p = static_cast<float>(position);
  for (std::size_t j = 0; j < inv_freq_.size(); ++j) {
    float angle = p * inv_freq_[j];
    cos_out[j] = std::cos(angle);
    sin_out[j] = std::sin(angle);
  }
}

void Rope::apply(float* x, const float* cos_values, const float* sin_values) const {
  int64_t half = rotary_dim_ / 2;
  if (pairing_ == RopePairing::kAdjacent) {
    for (int64_t j = 0; j < half; ++j) {
      float a = x[2 * j], b = x[2 * j + 1];
      x[2 * j] = a * cos_values[j] - b * sin_values[j];
      x[2 * j + 1] = b * cos_values[j] + a * sin_values[j];
    }
    return;
  }
  for (int64_t j = 0; j < half; ++j) {
    float a = x[j];
    float b = x[j + half];
    x[j] = a * cos_values[j] - b * sin_values[j];
    x[j + half] = b * cos_values[j] + a * sin_values[j];
  }
}

}  // namespace md::kernels
