#include "kernels/moe_routing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels/top_k.h"

namespace md::kernels {

void route_softmax_top_k(const float* logits, int64_t n, int64_t k, float* probs,
                         ExpertChoice* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, logits[i]);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    probs[i] = std::exp(logits[i] - max);
    sum += probs[i];
  }
  for (int64_t i = 0; i < n; ++i) probs[i] /= sum;
  std::array<Candidate, kMaxExpertsPerToken> best{};
  const int64_t chosen = top_k(probs, n, std::min(k, kMaxExpertsPerToken), best.data());
  float total = 0;
  for (int64_t j = 0; j < chosen; ++j) total += best[static_cast<std::size_t>(j)].logit;
  for (int64_t j = 0; j < chosen; ++j) {
    const Candidate& c = best[static_cast<std::size_t>(j)];
    out[j] = {c.id, c.logit / total};
  }
}

void sort_by_expert(ExpertChoice* choices, int64_t k) {
  std::sort(choices, choices + k,
            [](const ExpertChoice& a, const ExpertChoice& b) { return a.expert < b.expert; });
}

}  // namespace md::kernels
