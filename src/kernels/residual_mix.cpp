#include "kernels/residual_mix.h"

#include <cmath>

namespace md::kernels {

void residual_mix(const float* const* candidates, int64_t count, const float* w, int64_t width,
                  float eps, float* scores, float* out) {
  float max_score = -INFINITY;
  for (int64_t i = 0; i < count; ++i) {
    const float* v = candidates[i];
    float dot = 0, squares = 0;
    for (int64_t c = 0; c < width; ++c) {
      dot += v[c] * w[c];
      squares += v[c] * v[c];
    }
    scores[i] = dot * (1.0f / std::sqrt(squares / static_cast<float>(width) + eps));
    max_score = std::fmax(max_score, scores[i]);
  }
  float total = 0;
  for (int64_t i = 0; i < count; ++i) total += scores[i] = std::exp(scores[i] - max_score);
  for (int64_t i = 0; i < count; ++i) scores[i] /= total;
  for (int64_t c = 0; c < width; ++c) {
    float sum = scores[0] * candidates[0][c];  // not 0 + …: a lone −0 stays −0
    for (int64_t i = 1; i < count; ++i) sum += scores[i] * candidates[i][c];
    out[c] = sum;
  }
}

}  // namespace md::kernels
