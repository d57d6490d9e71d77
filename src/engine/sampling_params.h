// What a request asks of the sampler: temperature, truncation (top-k, top-p, min-p), penalties,
// seed and how many top log-probabilities to report. Validated once, before the first step.
#pragma once

#include <cstdint>
#include <optional>

namespace md::engine {

// Temperatures below this are greedy: dividing by them would overflow, and the result is argmax.
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;  // 0 or -1 (vLLM's spelling) = off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed = std::nullopt;  // absent: the caller draws one
  int32_t logprobs_top_k = 0;  // how many alternatives to report per token (OpenAI: 0..20)

  // Throws md::Error naming the first out-of-range field and its allowed range.
  void validate() const;
  // True when the result is the argmax whatever the draw: temperature ~0, top_k == 1 or top_p 0.
  bool greedy() const;
  // True when top-k truncation applies (0 and -1 both mean off).
  bool top_k_enabled() const { return top_k > 0; }
};

}  // namespace md::engine
