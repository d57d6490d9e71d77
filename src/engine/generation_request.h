// What a generation request asks for and what it produces per token: shared by the single-sequence
// Generator, the per-choice decoder and the server's scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampling_params.h"
#include "text/grammar/token_constraint.h"

namespace md::engine {

enum class FinishReason { kStop, kLength, kCancelled };
std::string_view finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled"

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 0;               // 0: until a stop or the context is full
  std::vector<std::string> stop;        // extra stop strings (not part of the returned text)
  std::vector<int32_t> stop_token_ids;  // in addition to the model's own
  bool ignore_eos = false;              // the model's end tokens do not stop (stop_token_ids do)
  bool skip_special = true;             // special tokens produce no text,
  std::vector<int32_t> kept_special;    // but these (a chat format's markers its parser reads)
  bool logprobs = false;                // record each generated token's log-probability
  int32_t top_logprobs = 0;             // alternatives per generated token (implies logprobs)
  bool prompt_logprobs = false;         // log p(prompt[t+1] | prompt[..t]) for every t
  int64_t min_tokens = 0;  // end and stop tokens are masked until this many tokens are out
  // Added to the raw logits before penalties and sampling (OpenAI logit_bias; ids in range).
  std::vector<std::pair<int32_t, float>> logit_bias;
  bool include_stop_str_in_output = false;  // a matched stop string ends the text, kept
  // Structured output: every token must keep the text a prefix of a sentence of this grammar
  // (masked before sampling); the choice ends where the sentence is complete. Null: free text.
  std::shared_ptr<grammar::TokenConstraint> constraint;
  // When set, the grammar applies only after this token (the end of the model's reasoning).
  std::optional<int32_t> constraint_after;
  // When set, the grammar is lazy: the text is free until this token (a tool call's opening),
  // follows the grammar from there to the end of its sentence, and is free again after it.
  std::optional<int32_t> constraint_trigger;
};

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0;              // under the model's raw distribution (when requested)
  std::vector<TokenLogprob> top;  // top_logprobs alternatives
};

}  // namespace md::engine
