#include "kernels/latent_attention.h"

#include <cmath>

namespace md::kernels {

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void latent_attention(const float* q_latent, const float* q_shared, int64_t heads, int64_t rank,
                      int64_t shared_dim, const LatentCache& cache, float scale, float* scores,
                      float* context) {
  for (int64_t h = 0; h < heads; ++h) {
    const float* ql = q_latent + h * rank;
    const float* qs = q_shared + h * shared_dim;
    float max_score = -INFINITY;
    for (int64_t t = 0; t < cache.positions; ++t) {
      const float latent = dot(ql, cache.latents + t * cache.latent_stride, rank);
      const float shared = dot(qs, cache.shared + t * cache.shared_stride, shared_dim);
      scores[t] = (latent + shared) * scale;
      max_score = std::fmax(max_score, scores[t]);
    }
    float total = 0;
    for (int64_t t = 0; t < cache.positions; ++t)
      total += scores[t] = std::exp(scores[t] - max_score);
    float* out = context + h * rank;
    for (int64_t r = 0; r < rank; ++r) out[r] = 0;
    for (int64_t t = 0; t < cache.positions; ++t) {
      const float p = scores[t] / total;
      const float* c = cache.latents + t * cache.latent_stride;
      for (int64_t r = 0; r < rank; ++r) out[r] += p * c[r];
    }
  }
}

}  // namespace md::kernels
