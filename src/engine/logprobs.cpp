#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "engine/token_candidates.h"

namespace md::engine {
namespace {

void check_row(std::span<const float> logits) {
  if (logits.empty()) md::fail("log-probabilities of an empty logit row");
}

// logit - lse, defined for the degenerate rows too: with no finite normaliser (all -inf, or some
// +inf) a token is either impossible (-inf) or takes the mass with the other +inf logits (0).
float log_softmax_at(float logit, double lse) {
  if (std::isnan(logit)) return -std::numeric_limits<float>::infinity();
  if (std::isinf(lse))
    return logit == lse && lse > 0 ? 0.0f : -std::numeric_limits<float>::infinity();
  return static_cast<float>(static_cast<double>(logit) - lse);
}

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float v : logits) max_logit = std::max(max_logit, std::isnan(v) ? max_logit : v);
  if (std::isinf(max_logit)) return max_logit;  // all -inf, or some +inf: no finite normaliser
  double sum = 0.0;
  for (float v : logits) {
    if (!std::isnan(v)) sum += std::exp(static_cast<double>(v) - max_logit);
  }
  return max_logit + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k) {
  check_row(logits);
  if (k < 0) md::fail("top_logprobs count must be >= 0, got {}", k);
  std::vector<Candidate> best;
  select_top_k(logits, k, best);
  std::sort(best.begin(), best.end(), ranks_before);
  const double lse = log_sum_exp(logits);
  std::vector<TokenLogprob> out;
  out.reserve(best.size());
  for (const Candidate& c : best) {
    out.push_back({c.id, log_softmax_at(c.value, lse)});
  }
  return out;
}

float logprob_of(std::span<const float> logits, int32_t token) {
  check_row(logits);
  if (token < 0 || static_cast<std::size_t>(token) >= logits.size()) {
    md::fail("logprob token id {} is outside the vocabulary [0, {})", token, logits.size());
  }
  return log_softmax_at(logits[static_cast<std::size_t>(token)], log_sum_exp(logits));
}

ScoredToken score_token(std::span<const float> logits, int32_t token, int top_k) {
  ScoredToken scored;
  scored.logprob = logprob_of(logits, token);
  const float value = logits[static_cast<std::size_t>(token)];
  for (std::size_t i = 0; i < logits.size(); ++i) {
    bool before = logits[i] > value || (logits[i] == value && static_cast<int32_t>(i) < token);
    scored.rank += before ? 1 : 0;
  }
  if (top_k > 0) scored.top = top_logprobs(logits, top_k);
  return scored;
}

}  // namespace md::engine
