// Turns one row of logits into a token for one sequence: penalties from the token history, then
// greedy argmax or a temperature / top-k / top-p / min-p draw whose randomness is a pure function
// of (seed, position), so output is reproducible and independent of batching and call order.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/token_candidates.h"

namespace md::engine {

// Order of operations in sample(), following vLLM and Hugging Face:
//   1. penalties on the raw logits: repetition (HF/vLLM: prompt + generated tokens), then
//      frequency and presence (OpenAI/vLLM: generated tokens only);
//   2. greedy (temperature ~0 or top_k == 1): argmax, ties to the lowest id, no division;
//   3. temperature, top-k, top-p, min-p: HF's warper order. Top-k and min-p commute (min-p
//      compares with the maximum, which every truncation keeps); top-p then min-p means min-p
//      filters what top-p kept (vLLM's V1 sampler applies min-p before top-k/top-p; the two
//      orders differ only when top-p and min-p are both set);
//   4. inverse-CDF draw over the survivors ranked by (probability desc, id asc) with the uniform
//      for (seed, position), so a low draw always means a likely token.
class Sampler {
 public:
  // Validates params and vocab_size (md::Error). `seed` is params.seed when present; otherwise
  // the caller draws one and can report it.
  Sampler(const SamplingParams& params, int32_t vocab_size, uint64_t seed);

  // Token history for the penalties. Ids outside the vocabulary throw md::Error (prompts may come
  // from a request as token arrays).
  void observe_prompt(std::span<const int32_t> prompt);
  void observe_generated(int32_t token);

  // Returns the token for `position` (where the token will sit in its sequence: the uniform draw
  // is a function of seed and position only). Applies the penalties to the logits in place (and
  // turns +inf into the largest finite float). logits.size() must equal the vocabulary size
  // (md::Error otherwise: a caller bug, caught before any state changes).
  int32_t sample(std::span<float> logits, int64_t position);

  // The distribution sample() draws from at `logits` (penalties applied in place first): the
  // surviving tokens with their normalised probabilities, most likely first (ties: lower id).
  // Greedy parameters give the argmax with probability 1. Speculative verification needs p
  // explicitly for the rejection rule.
  std::vector<Candidate> distribution(std::span<float> logits);

  // Step 1 alone, exposed so that its arithmetic can be checked exactly.
  void apply_penalties(std::span<float> logits) const;

  // Index of the largest logit; ties go to the lowest id and NaN counts as -inf (all NaN: 0).
  static int32_t argmax(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

 private:
  int32_t draw(std::span<float> logits, int64_t position);
  // Fills candidates_ with unnormalised probabilities exp((logit - max) / T), after top-k.
  // Returns false when no token has any probability (every logit NaN or -inf).
  bool gather_probabilities(std::span<float> logits);
  void apply_min_p();
  void check_token(int32_t token, const char* what) const;

  SamplingParams params_;
  int32_t vocab_size_;
  uint64_t seed_;
  std::unordered_set<int32_t> seen_;                      // prompt + generated: repetition penalty
  std::unordered_map<int32_t, int32_t> generated_count_;  // generated only: presence, frequency
  // Scratch, kept between calls to avoid allocations per token.
  std::vector<Candidate> candidates_;
  MassSelector selector_;
};

}  // namespace md::engine
