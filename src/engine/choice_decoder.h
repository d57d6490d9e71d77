// One choice's token pipeline, step by step: logit bias, min_tokens and grammar masking, sampling
// (with the raw log-probabilities when asked), end and stop tokens, streamed detokenisation, stop
// strings, max_tokens and the context limit. The single-sequence Generator (run, chat) and the
// server's batch scheduler both drive it, so the three behave the same for the same request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/generation_request.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "engine/stop_tokens.h"
#include "text/stream_detokenizer.h"
#include "text/tokenizer.h"

namespace md::engine {

// What one sampled token did.
struct TokenOutcome {
  GeneratedToken token;
  // The token is part of the output proper (not the end or stop token that finished the choice):
  // it gets a log-probability entry and, unless it is special, text.
  bool reported = true;
  std::string text;       // text released by this token (stop strings and partial characters held)
  bool finished = false;  // nothing more is generated for this choice
  FinishReason finish = FinishReason::kLength;
  std::optional<std::string> stop_string;  // the stop string that ended the choice
  std::optional<int32_t> stop_token;       // the request's stop_token_ids entry that ended it
};

class ChoiceDecoder {
 public:
  // Validates the request (md::Error): a prompt that is empty or leaves no room in `capacity`,
  // sampling and stop parameters. Prompt + output never exceeds the sequence capacity.
  // `eos_ids` are the model's end tokens; `seed` drives the random draws (see choice_seed).
  ChoiceDecoder(const GenerationRequest& request, std::vector<int32_t> eos_ids, int32_t vocab_size,
                const Tokenizer& tokenizer, uint64_t seed, int64_t capacity);

  // Samples the token at sequence position `position` from `logits` (overwritten) and runs it
  // through the pipeline. Must not be called after a finished outcome.
  TokenOutcome next(std::span<float> logits, int64_t position);

  // Speculative verification of `draft` proposed for `position` with draft distribution `q`
  // (candidates and probabilities; greedy drafters give {draft, 1}). Greedy parameters: the
  // target's own token, accepted when it equals the draft. Otherwise the standard lossless rule:
  // accept with probability min(1, p(draft)/q(draft)) (uniform lane 1), else draw the correction
  // from max(0, p - q) normalised (lane 2). Either way the token then runs through the pipeline
  // like next()'s. `accepted` tells whether the token is the draft.
  TokenOutcome verify_draft(std::span<float> logits, int64_t position, int32_t draft,
                            std::span<const std::pair<int32_t, float>> q, bool& accepted);

  // Benchmarks only (--force-accept): takes `token` as if it had been sampled.
  TokenOutcome force(int32_t token) {
    GeneratedToken chosen;
    chosen.id = token;
    return process(std::move(chosen));
  }

  int64_t generated() const { return generated_; }
  bool greedy() const { return request_.sampling.greedy(); }
  float temperature() const { return request_.sampling.temperature; }
  uint64_t seed() const { return sampler_.seed(); }
  // The output budget: max_tokens clamped to what the context leaves after the prompt.
  int64_t budget() const { return budget_; }

 private:
  // Returns false when the grammar allows no token at all (the choice must end).
  bool bias_and_mask(std::span<float> logits);
  // The outcome of a choice the grammar leaves no token for: it ends as if stopped.
  TokenOutcome grammar_dead_end();
  // Everything after the choice of the token: counting, stops, text, budget.
  TokenOutcome process(GeneratedToken chosen);
  void record_logprobs(std::span<const float> logits, GeneratedToken& chosen);
  void finish_with_flush(TokenOutcome& outcome, FinishReason reason);

  const GenerationRequest& request_;
  Sampler sampler_;
  StopTokens stop_tokens_;
  StopStringMatcher stop_strings_;
  StreamDetokenizer detokenizer_;
  int64_t budget_ = 0;
  int64_t generated_ = 0;
  std::vector<float> raw_;  // the unmodified logits, kept only when log-probabilities are asked
  // Structured output: where the grammar stands, and whether it applies to the next token.
  enum class GrammarPhase {
    kOff,        // no grammar
    kReasoning,  // free until request_.constraint_after
    kFree,       // free until request_.constraint_trigger (a lazy grammar)
    kActive,     // every token must keep the text in the grammar
  };
  // Moves the grammar past `token`; true when its sentence is complete and the choice must end.
  bool advance_grammar(int32_t token);
  std::optional<grammar::TokenMatcher> matcher_;
  GrammarPhase phase_ = GrammarPhase::kOff;
};

// The random stream of sample `sample_index` of prompt `prompt_index` in a request with `seed`:
// sample 0 of prompt 0 uses the seed itself (a request's first choice never depends on n or on
// other prompts), the others a mixed, distinct stream.
uint64_t choice_seed(uint64_t seed, int64_t prompt_index, int64_t sample_index);

// A seed from the operating system's random source (requests without one).
uint64_t fresh_seed();

}  // namespace md::engine
