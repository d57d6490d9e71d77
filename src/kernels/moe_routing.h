// Mixture-of-experts routing and the expert matrices of one MoE layer: the arithmetic that a
// reference forward and the program's MoE instructions share, so both choose the same experts
// with the same weights, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weight_matrix.h"

namespace md::kernels {

// The routed experts of a MoE layer, expert e at index e of each list (views into the
// checkpoint's stacked tensors: gate and up [moe_intermediate][hidden], down the transpose).
struct ExpertMatrices {
  std::vector<WeightMatrix> gate, up, down;

  int64_t count() const { return static_cast<int64_t>(gate.size()); }
};

// One row's choice: expert ids in rank order and their weights.
struct ExpertChoice {
  int32_t expert = 0;
  float weight = 0;
};

// The most experts a row may choose (configs asking for more are refused at load).
inline constexpr int64_t kMaxExpertsPerToken = 32;

// Softmax top-k routing with the chosen probabilities renormalised to sum to one (Qwen3.5-MoE,
// Qwen3-MoE): p = softmax(logits) in f32 (max subtracted, sequential sum), the k largest p
// (ties to the lower id, NaN never chosen over a number: kernels/top_k.h), each divided by their
// sum taken in rank order. Writes k choices to out (1 <= k <= min(n, kMaxExpertsPerToken));
// `probs` is n floats of scratch.
void route_softmax_top_k(const float* logits, int64_t n, int64_t k, float* probs,
                         ExpertChoice* out);

// Sigmoid routing with a selection-only bias (Muse Spark, Kimi K3's e_score_correction_bias):
// scores s = sigmoid(logit · multiplier), the k largest s + bias chosen by iterated argmax (the
// lowest id wins ties; a NaN is never chosen over a number), each weighted
// s / (Σ chosen s + sum_epsilon) with the sum taken in selection order (Muse adds 1e-15, Kimi
// nothing). Writes k choices to out in selection order (1 <= k <= min(n, kMaxExpertsPerToken));
// `scratch` is 3n floats.
void route_sigmoid_bias_top_k(const float* logits, const float* bias, int64_t n, int64_t k,
                              float multiplier, float sum_epsilon, float* scratch,
                              ExpertChoice* out);

// The same choices ordered by ascending expert id: the order in which a row's expert outputs are
// summed (transformers' per-expert loop adds them so).
void sort_by_expert(ExpertChoice* choices, int64_t k);

}  // namespace md::kernels
