#include "kernels/moe_routing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels/activations.h"
#include "kernels/top_k.h"

namespace md::kernels {

void route_sigmoid_bias_top_k(const float* logits, const float* bias, int64_t n, int64_t k,
                              float multiplier, float sum_epsilon, float* scratch,
                              ExpertChoice* out) {
  float* score = scratch;
  float* selection = scratch + n;
  float* taken = scratch + 2 * n;  // 1 once chosen
  for (int64_t e = 0; e < n; ++e) {
    score[e] = sigmoid(logits[e] * multiplier);
    selection[e] = score[e] + bias[e];
    taken[e] = 0;
  }
  k = std::min(k, kMaxExpertsPerToken);
  float sum = 0;
  for (int64_t slot = 0; slot < k; ++slot) {
    int64_t best = -1;
    for (int64_t e = 0; e < n; ++e) {
      if (taken[e] != 0) continue;
      // Strict >: ties keep the lower id; a number replaces a NaN, never the reverse.
      if (best < 0 || selection[e] > selection[best] ||
          (std::isnan(selection[best]) && !std::isnan(selection[e]))) {
        best = e;
      }
    }
    taken[best] = 1;
    out[slot] = {static_cast<int32_t>(best), 0.0f};
    sum += score[best];
  }
  for (int64_t slot = 0; slot < k; ++slot) {
    out[slot].weight = score[out[slot].expert] / (sum + sum_epsilon);
  }
}

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
