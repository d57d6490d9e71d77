#include "kernels/norms.h"

#include <cmath>

#include "base/dtype.h"
#include "kernels/activations.h"

namespace md::kernels {

namespace {

// The sum of squares in double: a norm is a tiny share of the work and this keeps it exact enough
// that the kernels' rounding never shows in comparisons against f32 references.
double sum_of_squares(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

}  // namespace

void rms_norm(const float* x, const uint16_t* w, int64_t n, float eps, NormWeight kind, float* y) {
  float inv =
      static_cast<float>(1.0 / std::sqrt(sum_of_squares(x, n) / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) {
    float scale = 1.0f;
    if (w != nullptr) {
      float weight = bf16_to_f32(w[i]);
      scale = kind == NormWeight::kZeroCentred ? 1.0f + weight : weight;
    }
    y[i] = x[i] * inv * scale;
  }
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  float inv =
      static_cast<float>(1.0 / std::sqrt(sum_of_squares(x, n) / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

void rms_norm_unweighted(const float* x, int64_t n, float eps, float* y) {
  rms_norm(x, static_cast<const uint16_t*>(nullptr), n, eps, NormWeight::kPlain, y);
}

void scaled_rms_norm(float* x, const float* scale, int64_t n, float eps) {
  if (scale != nullptr) {
    for (int64_t i = 0; i < n; ++i) x[i] *= scale[i];
  }
  rms_norm_unweighted(x, n, eps, x);
}

void gated_rms_norm(const float* o, const float* z, const float* w, int64_t n, float eps, float* y,
                    Activation gate) {
  float inv =
      static_cast<float>(1.0 / std::sqrt(sum_of_squares(o, n) / static_cast<double>(n) + eps));
  if (gate == Activation::kSilu) {  // the GDN's hot path keeps its plain loop
    for (int64_t i = 0; i < n; ++i) y[i] = o[i] * inv * w[i] * silu(z[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = o[i] * inv * w[i] * activate(gate, z[i]);
}

void l2_normalize(float* x, int64_t n, float eps, float scale) {
  float inv = static_cast<float>(1.0 / std::sqrt(sum_of_squares(x, n) + eps)) * scale;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace md::kernels
