#include "kernels/latent_attention.h"

#include "kernels/attention_runs.h"

namespace md::kernels {

void latent_attention(const float* q, int64_t heads, int64_t rank, int64_t shared_dim,
                      const float* rows, int64_t positions, float scale, float* scores,
                      float* context) {
  const int64_t width = rank + shared_dim;
  const KeyRun run{rows, rows, positions, width};
  for (int64_t h = 0; h < heads; ++h) {
    attend_runs(q + h * width, {&run, 1}, width, rank, scale, scores, context + h * rank);
  }
}

}  // namespace md::kernels
