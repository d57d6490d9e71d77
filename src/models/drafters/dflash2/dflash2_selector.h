// DFlash2's candidate selector (qwen38-dflash2.md §11.6): each draft row offers its top-k logits
// as candidates, and a low-rank predecessor × successor bilinear term re-scores them given the
// token chosen before; the path is a greedy (or sampled) left-to-right walk from the anchor.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/top_k.h"
#include "models/drafters/dflash2/dflash2_weights.h"

namespace md::dflash2 {

// A candidate: its id and its unary score u (the logit).
using Candidate = kernels::Candidate;

// The k largest logits, sorted by value descending, ties to the lower id; NaN ranks as -inf (so
// never above a number). k is clamped to vocab.
inline std::vector<Candidate> top_candidates(const float* logits, int64_t vocab, int64_t k) {
  return kernels::top_k(logits, vocab, k);
}

// score[k] = u[k] + Σ_r Pcb[prev][r] · rho[r] · Scb[c_k][r] (rho = hidden_projection · η of the
// row, `rank` floats). The bilinear sum runs in double: it is a few hundred terms per candidate
// and the walk's argmax should not hinge on f32 summation order.
std::vector<double> selector_scores(const DFlash2SelectorWeights& w, int32_t prev, const float* rho,
                                    std::span<const Candidate> candidates);

// Which candidate a row takes. temperature <= 0: the first maximum. Otherwise the inverse CDF of
// softmax(score / T) at `uniform` (in [0, 1)) over the candidates in their sorted order, and
// `probabilities` (when not null) receives that softmax.
int64_t pick_candidate(std::span<const double> scores, float temperature, double uniform,
                       std::vector<double>* probabilities);

struct SelectorPath {
  std::vector<int32_t> tokens;  // d_1 .. d_rows
  // The distribution each d_i was drawn from: {d_i, 1} when greedy, else every candidate with its
  // softmax probability (the q_i of sampled verification, §10.4).
  std::vector<std::vector<std::pair<int32_t, float>>> q;
};

// The walk over `candidates.size()` draft rows from prev = anchor; rho holds one `rank`-float row
// per draft row. uniforms[i] drives row i when temperature > 0.
SelectorPath select_path(const DFlash2SelectorWeights& w, int32_t anchor,
                         std::span<const std::vector<Candidate>> candidates, const float* rho,
                         float temperature, std::span<const double> uniforms);

}  // namespace md::dflash2
