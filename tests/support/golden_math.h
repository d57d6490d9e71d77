// What the golden tests of every model family share: reading a golden tensor, the relative error
// of a logit row against its golden, and argmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/safetensors_file.h"

namespace md::test {

// A golden tensor's elements (throws when the tensor is missing).
template <typename T>
std::vector<T> tensor_values(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.find(name);
  if (view == nullptr) throw std::runtime_error("golden tensor missing: " + name);
  std::vector<T> out(view->nbytes / sizeof(T));
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

// max |a − b| over max |b| (the golden's scale; the plain difference when it is all zero).
inline double relative_error(const float* a, const float* b, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// Index of the largest value, the first among equals.
inline int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace md::test
