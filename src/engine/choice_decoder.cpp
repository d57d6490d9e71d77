#include "engine/choice_decoder.h"

#include <algorithm>
#include <limits>
#include <random>

#include "base/error.h"
#include "engine/counter_rng.h"

namespace md::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

uint64_t choice_seed(uint64_t seed, int64_t prompt_index, int64_t sample_index) {
  if (prompt_index == 0 && sample_index == 0) return seed;
  uint64_t which =
      (static_cast<uint64_t>(prompt_index) << 32) ^ static_cast<uint64_t>(sample_index);
  return mix64(seed ^ mix64(which + 0x9e3779b97f4a7c15ULL));
}

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

ChoiceDecoder::ChoiceDecoder(const GenerationRequest& request, std::vector<int32_t> eos_ids,
                             int32_t vocab_size, const Tokenizer& tokenizer, uint64_t seed,
                             int64_t capacity)
    : request_(request),
      sampler_(request.sampling, vocab_size, seed),
      stop_tokens_{request.stop_token_ids, std::move(eos_ids), request.ignore_eos},
      stop_strings_(request.stop),
      detokenizer_(tokenizer, request.skip_special, request.kept_special) {
  auto prompt_size = static_cast<int64_t>(request.prompt.size());
  if (prompt_size == 0) fail("the prompt is empty: at least one token is needed");
  if (prompt_size >= capacity) {
    fail(
        "the prompt has {} tokens but the context holds {} (prompt + at least one generated "
        "token); raise --context or shorten the prompt",
        prompt_size, capacity);
  }
  if (request.max_tokens < 0) fail("max_tokens must be >= 0 (0 = until the context is full)");
  if (request.min_tokens < 0) fail("min_tokens must be >= 0");
  for (auto [token, bias] : request.logit_bias) {
    if (token < 0 || token >= vocab_size) {
      fail("logit_bias token id {} is outside the vocabulary [0, {})", token, vocab_size);
    }
  }
  // Prompt + output never exceeds the capacity (max_model_len): the last output token is the one
  // that fills it and is never fed back.
  budget_ = std::max<int64_t>(0, capacity - prompt_size);
  if (request.max_tokens > 0) budget_ = std::min(budget_, request.max_tokens);
  sampler_.observe_prompt(request.prompt);
  if (request.constraint) {
    matcher_.emplace(request.constraint);
    phase_ = request.constraint_after     ? GrammarPhase::kReasoning
             : request.constraint_trigger ? GrammarPhase::kFree
                                          : GrammarPhase::kActive;
  }
}

// OpenAI's order: logit_bias on the raw logits, then (while fewer than min_tokens are out) end
// and stop tokens masked; then the grammar's mask; the sampler then applies the penalties.
bool ChoiceDecoder::bias_and_mask(std::span<float> logits) {
  for (auto [token, bias] : request_.logit_bias) logits[static_cast<std::size_t>(token)] += bias;
  if (generated_ < request_.min_tokens) {
    for (int32_t id : stop_tokens_.ids) logits[static_cast<std::size_t>(id)] = kNegInf;
    if (!request_.ignore_eos) {
      for (int32_t id : stop_tokens_.eos_ids) logits[static_cast<std::size_t>(id)] = kNegInf;
    }
  }
  if (phase_ != GrammarPhase::kActive) return true;
  if (!matcher_->mask_logits(logits)) return false;
  if (generated_ >= request_.min_tokens) return true;
  // min_tokens may have masked the only tokens the grammar allows (its end): nothing is left.
  return std::any_of(logits.begin(), logits.end(), [](float v) { return v != kNegInf; });
}

TokenOutcome ChoiceDecoder::grammar_dead_end() {
  TokenOutcome outcome;
  outcome.token.id = stop_tokens_.eos_ids.empty() ? 0 : stop_tokens_.eos_ids.front();
  outcome.reported = false;
  ++generated_;
  finish_with_flush(outcome, FinishReason::kStop);
  return outcome;
}

void ChoiceDecoder::finish_with_flush(TokenOutcome& outcome, FinishReason reason) {
  outcome.finished = true;
  outcome.finish = reason;
  // What the detokenizer and the stop matcher still hold: an incomplete character, or a partial
  // stop string that never completed. A stop string may still complete inside the flush.
  StopStringOutput tail = stop_strings_.push(detokenizer_.finish());
  outcome.text += tail.emit;
  if (tail.stopped) {
    outcome.finish = FinishReason::kStop;
    outcome.stop_string = request_.stop[static_cast<std::size_t>(stop_strings_.matched_index())];
    if (request_.include_stop_str_in_output) outcome.text += *outcome.stop_string;
    return;
  }
  outcome.text += stop_strings_.finish();
}

void ChoiceDecoder::record_logprobs(std::span<const float> logits, GeneratedToken& chosen) {
  // Log-probabilities are of the raw distribution, before bias, penalties and temperature; they
  // cost a copy of the logits, so only when asked.
  if (!(request_.logprobs || request_.top_logprobs > 0)) return;
  raw_.assign(logits.begin(), logits.end());
  if (request_.top_logprobs > 0) chosen.top = top_logprobs(raw_, request_.top_logprobs);
}

TokenOutcome ChoiceDecoder::next(std::span<float> logits, int64_t position) {
  GeneratedToken chosen;
  record_logprobs(logits, chosen);
  if (!bias_and_mask(logits)) return grammar_dead_end();
  chosen.id = sampler_.sample(logits, position);
  return process(std::move(chosen));
}

TokenOutcome ChoiceDecoder::verify_draft(std::span<float> logits, int64_t position, int32_t draft,
                                         std::span<const std::pair<int32_t, float>> q,
                                         bool& accepted) {
  if (request_.sampling.greedy()) {
    TokenOutcome outcome = next(logits, position);
    accepted = outcome.token.id == draft;
    return outcome;
  }
  GeneratedToken chosen;
  record_logprobs(logits, chosen);
  if (!bias_and_mask(logits)) {
    accepted = false;
    return grammar_dead_end();
  }
  std::vector<Candidate> p = sampler_.distribution(logits);
  auto prob = [](auto& list, int32_t id) -> double {
    for (const auto& entry : list) {
      if (static_cast<int32_t>(entry.id) == id) return entry.value;
    }
    return 0.0;
  };
  // q by id, looked up by binary search (a drafter's q may cover the whole vocabulary or a few
  // candidates: neither a scan per candidate of p nor a vocabulary-sized table per position). A
  // whole-vocabulary q comes in id order already; only another order is sorted, in a copy.
  auto by_id = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::vector<std::pair<int32_t, float>> sorted;
  std::span<const std::pair<int32_t, float>> q_by_id = q;
  if (!std::is_sorted(q.begin(), q.end(), by_id)) {
    sorted.assign(q.begin(), q.end());
    std::sort(sorted.begin(), sorted.end(), by_id);
    q_by_id = sorted;
  }
  auto q_at = [&](int32_t id) {
    auto [first, last] = std::equal_range(q_by_id.begin(), q_by_id.end(),
                                          std::pair<int32_t, float>{id, 0.0f}, by_id);
    double sum = 0;
    for (auto it = first; it != last; ++it) sum += it->second;
    return sum;
  };
  double q_draft = q_at(draft);
  double p_draft = prob(p, draft);
  uint64_t seed = sampler_.seed();
  accepted = q_draft > 0 && uniform_at_lane(seed, position, 1) * q_draft < p_draft;
  if (accepted) {
    chosen.id = draft;
  } else {
    // The correction: max(0, p - q) renormalised, drawn by inverse CDF in ranking order.
    std::vector<Candidate> residual;
    double total = 0;
    for (const Candidate& c : p) {
      double r = std::max(0.0, static_cast<double>(c.value) - q_at(static_cast<int32_t>(c.id)));
      if (r > 0) {
        residual.push_back({static_cast<float>(r), c.id});
        total += r;
      }
    }
    if (residual.empty()) residual = p, total = 1.0;  // p == q on the draft's support: p itself
    double target = uniform_at_lane(seed, position, 2) * total, run = 0;
    chosen.id = residual.back().id;
    for (const Candidate& c : residual) {
      run += c.value;
      if (run > target) {
        chosen.id = c.id;
        break;
      }
    }
  }
  return process(std::move(chosen));
}

bool ChoiceDecoder::advance_grammar(int32_t token) {
  switch (phase_) {
    case GrammarPhase::kOff:
      return false;
    case GrammarPhase::kReasoning:
      if (token == *request_.constraint_after) {
        phase_ = request_.constraint_trigger ? GrammarPhase::kFree : GrammarPhase::kActive;
      }
      return false;
    case GrammarPhase::kFree:
      if (token == *request_.constraint_trigger) {
        matcher_.emplace(request_.constraint);  // each lazy sentence starts afresh
        phase_ = GrammarPhase::kActive;
      }
      return false;
    case GrammarPhase::kActive:
      // The mask allowed the token (force() in benchmarks aside): the grammar moves past it.
      if (!matcher_->accept(token) || !matcher_->finished()) return false;
      if (!request_.constraint_trigger) return true;
      phase_ = GrammarPhase::kFree;  // a lazy sentence ended: free text again
      return false;
  }
  return false;
}

TokenOutcome ChoiceDecoder::process(GeneratedToken chosen) {
  TokenOutcome outcome;
  if (!raw_.empty()) chosen.logprob = logprob_of(raw_, chosen.id);
  outcome.token = std::move(chosen);
  ++generated_;

  const int32_t id = outcome.token.id;
  const bool grammar_complete = advance_grammar(id);
  if (stop_tokens_.is_stop(id)) {
    outcome.reported = false;
    if (contains(request_.stop_token_ids, id)) outcome.stop_token = id;
    finish_with_flush(outcome, FinishReason::kStop);
    return outcome;
  }
  sampler_.observe_generated(id);
  StopStringOutput piece = stop_strings_.push(detokenizer_.push(id));
  outcome.text = std::move(piece.emit);
  if (piece.stopped) {
    outcome.finished = true;
    outcome.finish = FinishReason::kStop;
    outcome.stop_string = request_.stop[static_cast<std::size_t>(stop_strings_.matched_index())];
    if (request_.include_stop_str_in_output) outcome.text += *outcome.stop_string;
    return outcome;
  }
  if (grammar_complete) {
    // The sentence is complete and nothing may follow: the choice ends here (no end token is
    // sampled; the finish reason is stop, as when the model ends a JSON answer itself).
    finish_with_flush(outcome, FinishReason::kStop);
  } else if (generated_ >= budget_) {
    finish_with_flush(outcome, FinishReason::kLength);
  }
  return outcome;
}

}  // namespace md::engine
