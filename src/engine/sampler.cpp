#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "engine/counter_rng.h"
#include "kernels/fast_exp.h"

namespace md::engine {
using kernels::exp_nonpositive;
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

// Largest logit, NaN ignored (-inf when every logit is NaN or -inf). Eight independent running
// maxima keep eight comparisons in flight instead of one serial dependency chain.
float max_logit(std::span<const float> logits) {
  constexpr std::size_t kLanes = 8;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, kNegInf);
  std::size_t i = 0;
  for (; i + kLanes <= logits.size(); i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) {
      lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    }
  }
  for (; i < logits.size(); ++i) lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
  return *std::max_element(lane, lane + kLanes);
}

// +inf as the largest finite float: logit - max would be NaN for the +inf logits themselves; this
// way they share the probability equally and every finite logit gets none.
float finite_top(float v) {
  return std::min(v, std::numeric_limits<float>::max());
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size, uint64_t seed)
    : params_(params), vocab_size_(vocab_size), seed_(seed) {
  params_.validate();
  if (vocab_size <= 0) md::fail("sampler vocabulary size must be positive, got {}", vocab_size);
}

void Sampler::check_token(int32_t token, const char* what) const {
  if (token < 0 || token >= vocab_size_) {
    md::fail("{} token id {} is outside the vocabulary [0, {})", what, token, vocab_size_);
  }
}

void Sampler::observe_prompt(std::span<const int32_t> prompt) {
  for (int32_t token : prompt) check_token(token, "prompt");
  // Only the repetition penalty looks at the prompt; skip the set when it is off.
  if (params_.repetition_penalty == 1.0f) return;
  seen_.insert(prompt.begin(), prompt.end());
}

void Sampler::observe_generated(int32_t token) {
  check_token(token, "generated");
  if (params_.repetition_penalty != 1.0f) seen_.insert(token);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    ++generated_count_[token];
  }
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const float rep = params_.repetition_penalty;
  for (int32_t token : seen_) {
    float& v = logits[static_cast<std::size_t>(token)];
    v = v > 0.0f ? v / rep : v * rep;  // always towards "less likely", whatever the sign
  }
  for (const auto& [token, count] : generated_count_) {
    logits[static_cast<std::size_t>(token)] -=
        params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

int32_t Sampler::argmax(std::span<const float> logits) {
  if (logits.empty()) md::fail("argmax of an empty logit row");
  // Two passes, both fast: the vectorised maximum, then the first index holding it.
  const float best = max_logit(logits);
  if (best == kNegInf) return 0;  // every logit is NaN or -inf: all tie
  const auto it = std::find(logits.begin(), logits.end(), best);
  return static_cast<int32_t>(it - logits.begin());
}

int32_t Sampler::sample(std::span<float> logits, int64_t position) {
  if (logits.size() != static_cast<std::size_t>(vocab_size_)) {
    md::fail("sampler got {} logits for a vocabulary of {}", logits.size(), vocab_size_);
  }
  apply_penalties(logits);
  if (params_.greedy()) return argmax(logits);
  return draw(logits, position);
}

std::vector<Candidate> Sampler::distribution(std::span<float> logits) {
  if (logits.size() != static_cast<std::size_t>(vocab_size_)) {
    md::fail("sampler got {} logits for a vocabulary of {}", logits.size(), vocab_size_);
  }
  apply_penalties(logits);
  if (params_.greedy() || !gather_probabilities(logits)) return {{1.0f, argmax(logits)}};
  if (params_.top_p < 1.0f) {
    candidates_.resize(selector_.select_prefix(candidates_, params_.top_p, true).count);
  }
  if (params_.min_p > 0.0f) apply_min_p();
  std::vector<Candidate> kept;
  double total = 0;
  for (const Candidate& c : candidates_) {
    if (c.value > 0.0f) {
      kept.push_back(c);
      total += c.value;
    }
  }
  for (Candidate& c : kept) c.value = static_cast<float>(c.value / total);
  std::sort(kept.begin(), kept.end(), ranks_before);
  return kept;
}

bool Sampler::gather_probabilities(std::span<float> logits) {
  const float inv_t = 1.0f / params_.temperature;
  if (params_.top_k_enabled() && params_.top_k < vocab_size_) {
    // Top-k first: the maximum is then among k candidates, which saves a pass over the row.
    select_top_k(logits, params_.top_k, candidates_);
    float max = kNegInf;
    for (const Candidate& c : candidates_) max = std::max(max, c.value);
    if (max == kNegInf) return false;
    for (Candidate& c : candidates_) {
      c.value = exp_nonpositive((finite_top(c.value) - finite_top(max)) * inv_t);
    }
    return true;
  }
  float max = max_logit(logits);
  if (max == kNegInf) return false;
  if (max == kPosInf) {
    for (float& v : logits) v = finite_top(v);
    max = finite_top(max);
  }
  // Whole vocabulary, in one vectorised pass. Zero probabilities (NaN logits, underflow) stay in:
  // the selector never returns them, and dropping them would cost another pass.
  candidates_.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    candidates_[i] = {exp_nonpositive((logits[i] - max) * inv_t), static_cast<int32_t>(i)};
  }
  return true;
}

void Sampler::apply_min_p() {
  // Unnormalised probabilities are relative to the maximum (exactly 1), which every earlier step
  // keeps, so p >= min_p * p_max is a comparison with min_p itself.
  const float threshold = params_.min_p;
  std::erase_if(candidates_, [threshold](const Candidate& c) { return c.value < threshold; });
}

int32_t Sampler::draw(std::span<float> logits, int64_t position) {
  if (!gather_probabilities(logits)) return 0;  // no token has any probability: as argmax
  if (params_.top_p < 1.0f) {
    // Smallest set of most likely tokens whose mass reaches top_p (HF/vLLM keep a token when the
    // mass ranked strictly above it is below top_p).
    candidates_.resize(selector_.select_prefix(candidates_, params_.top_p, true).count);
  }
  if (params_.min_p > 0.0f) apply_min_p();
  return selector_.at_fraction(candidates_, uniform_at(seed_, position)).id;
}

}  // namespace md::engine
