// Log-probabilities reported to the client (OpenAI `logprobs`): log-softmax of the model's raw
// logits, before penalties, temperature or truncation, as vLLM reports them by default.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace md::engine {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// log(sum(exp(logits))) computed stably (max subtracted, sum in double). NaN counts as -inf.
double log_sum_exp(std::span<const float> logits);

// The k most likely tokens, most likely first (ties: lower id first); k is clamped to the row
// size. Throws md::Error when k is negative or the row is empty.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int k);

// A token scored in its context (prompt log-probabilities): its log-probability, its rank (1 =
// most likely; ties ranked by lower id first) and the top alternatives.
struct ScoredToken {
  float logprob = 0;
  int64_t rank = 1;
  std::vector<TokenLogprob> top;
};
ScoredToken score_token(std::span<const float> logits, int32_t token, int top_k);

// Log-probability of one token. Throws md::Error when the token is outside the row.
float logprob_of(std::span<const float> logits, int32_t token);

}  // namespace md::engine
