#include "models/drafters/dflash2/dflash2_selector.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "base/error.h"

namespace md::dflash2 {

std::vector<double> selector_scores(const DFlash2SelectorWeights& w, int32_t prev, const float* rho,
                                    std::span<const Candidate> candidates) {
  int64_t rank = w.predecessor_codebook.cols;
  const uint16_t* pred = w.predecessor_codebook.row(prev);
  // Pcb[prev] ⊙ rho is shared by every candidate of the row.
  std::vector<double> left(static_cast<std::size_t>(rank));
  for (int64_t r = 0; r < rank; ++r) {
    left[static_cast<std::size_t>(r)] = static_cast<double>(bf16_to_f32(pred[r])) * rho[r];
  }
  std::vector<double> scores;
  scores.reserve(candidates.size());
  for (const Candidate& c : candidates) {
    const uint16_t* succ = w.successor_codebook.row(c.id);
    double pair = 0;
    for (int64_t r = 0; r < rank; ++r)
      pair += left[static_cast<std::size_t>(r)] * bf16_to_f32(succ[r]);
    scores.push_back(static_cast<double>(c.logit) + pair);
  }
  return scores;
}

int64_t pick_candidate(std::span<const double> scores, float temperature, double uniform,
                       std::vector<double>* probabilities) {
  auto n = static_cast<int64_t>(scores.size());
  int64_t best = 0;
  for (int64_t k = 1; k < n; ++k) {
    if (scores[static_cast<std::size_t>(k)] > scores[static_cast<std::size_t>(best)]) best = k;
  }
  if (temperature <= 0) return best;
  std::vector<double> p(scores.size());
  double top = scores[static_cast<std::size_t>(best)];
  double total = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    p[k] = std::exp((scores[k] - top) / temperature);
    total += p[k];
  }
  for (double& value : p) value /= total;
  int64_t chosen = -1;
  int64_t last_possible = best;
  double cumulative = 0;
  for (int64_t k = 0; k < n; ++k) {
    double pk = p[static_cast<std::size_t>(k)];
    if (pk > 0) last_possible = k;
    cumulative += pk;
    if (chosen < 0 && uniform < cumulative) chosen = k;
  }
  // A uniform at the very top of [0, 1) can exceed the rounded cumulative sum: it belongs to the
  // last candidate that has any probability.
  if (chosen < 0) chosen = last_possible;
  if (probabilities != nullptr) *probabilities = std::move(p);
  return chosen;
}

SelectorPath select_path(const DFlash2SelectorWeights& w, int32_t anchor,
                         std::span<const std::vector<Candidate>> candidates, const float* rho,
                         float temperature, std::span<const double> uniforms) {
  auto rows = static_cast<int64_t>(candidates.size());
  if (temperature > 0 && static_cast<int64_t>(uniforms.size()) < rows) {
    fail("DFlash2 sampled drafting needs {} uniforms, got {}", rows, uniforms.size());
  }
  int64_t rank = w.hidden_projection.rows;
  SelectorPath path;
  int32_t prev = anchor;
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<Candidate>& row = candidates[static_cast<std::size_t>(i)];
    std::vector<double> scores = selector_scores(w, prev, rho + i * rank, row);
    double uniform = temperature > 0 ? uniforms[static_cast<std::size_t>(i)] : 0.0;
    std::vector<double> p;
    int64_t k = pick_candidate(scores, temperature, uniform, &p);
    prev = row[static_cast<std::size_t>(k)].id;
    path.tokens.push_back(prev);
    std::vector<std::pair<int32_t, float>> q;
    if (temperature > 0) {
      for (std::size_t j = 0; j < row.size(); ++j) {
        q.emplace_back(row[j].id, static_cast<float>(p[j]));
      }
    } else {
      q.emplace_back(prev, 1.0f);
    }
    path.q.push_back(std::move(q));
  }
  return path;
}

}  // namespace md::dflash2
