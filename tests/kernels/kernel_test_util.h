// Random inputs and double-precision oracles shared by the kernel tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/dtype.h"

namespace md::test {

inline std::vector<float> random_floats(std::size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& value : values) value = normal(rng);
  return values;
}

inline std::vector<uint16_t> random_bf16(std::size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<uint16_t> bits(n);
  std::vector<float> values = random_floats(n, seed, scale);
  for (std::size_t i = 0; i < n; ++i) bits[i] = f32_to_bf16(values[i]);
  return bits;
}

inline double widen(uint16_t bits) {
  return static_cast<double>(bf16_to_f32(bits));
}

// max |a - b| / max |b|
inline double relative_max_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

}  // namespace md::test
