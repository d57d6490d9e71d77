#include "kernels/attention_runs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/dot_f32.h"

namespace md::kernels {

void attend_runs(const float* q, std::span<const KeyRun> runs, int64_t key_dim, int64_t value_dim,
                 float scale, float* scores, float* out) {
  float top = -std::numeric_limits<float>::infinity();
  int64_t n = 0;
  for (const KeyRun& run : runs) {
    for (int64_t t = 0; t < run.count; ++t, ++n) {
      scores[n] = dot_f32(q, run.keys + t * run.stride, key_dim) * scale;
      top = std::max(top, scores[n]);
    }
  }
  std::fill(out, out + value_dim, 0.0f);
  if (n == 0) return;
  // The normaliser in double, as kernels::attend does: it is one sum per head and keeps long
  // windows from losing small weights.
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    scores[i] = std::exp(scores[i] - top);
    total += scores[i];
  }
  auto inv_total = static_cast<float>(1.0 / total);
  n = 0;
  for (const KeyRun& run : runs) {
    for (int64_t t = 0; t < run.count; ++t, ++n) {
      float p = scores[n] * inv_total;
      const float* v = run.values + t * run.stride;
      for (int64_t d = 0; d < value_dim; ++d) out[d] += p * v[d];
    }
  }
}

}  // namespace md::kernels
