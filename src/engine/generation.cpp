#include "engine/generation.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/choice_decoder.h"

namespace md::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "stop";
}

double GenerationStats::prefill_tokens_per_second() const {
  int64_t computed = prompt_tokens - reused_tokens;
  return prefill_seconds > 0 ? static_cast<double>(computed) / prefill_seconds : 0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 && generated_tokens > 1
             ? static_cast<double>(generated_tokens - 1) / decode_seconds
             : 0;
}

Generator::Generator(LanguageModel& model, const Tokenizer& tokenizer, int64_t context)
    : model_(model), tokenizer_(tokenizer), state_(model.new_sequence(context)) {}

void Generator::reset() {
  state_->reset();
  cached_.clear();
  if (drafter_ != nullptr) drafter_->truncate_context(0);
}

void Generator::set_drafter(SpeculativeDrafter* drafter, int64_t block_size, int64_t force_accept,
                            float confidence_threshold) {
  drafter_ = nullptr;
  rounds_.reset();
  reset();
  if (drafter == nullptr) return;
  block_size = checked_block_size(model_, *drafter, block_size, force_accept);
  rounds_ = std::make_unique<SpeculativeRounds>(
      model_, block_size, force_accept,
      checked_confidence_threshold(*drafter, confidence_threshold, force_accept));
  drafter_ = drafter;
  model_.set_tap_layers(drafter->tap_layers());
}

// The sequence keeps what earlier requests fed it; a prompt that extends those tokens (a chat's
// next turn) only computes its new tail. Recurrent layers cannot rewind, so anything else starts
// over.
int64_t Generator::reuse_prefix(const std::vector<int32_t>& prompt) {
  bool extends = !cached_.empty() && prompt.size() > cached_.size() &&
                 std::equal(cached_.begin(), cached_.end(), prompt.begin());
  if (!extends) reset();
  return static_cast<int64_t>(cached_.size());
}

void Generator::feed(std::span<const int32_t> tokens, LogitRows rows, std::vector<float>& logits) {
  model_.forward(*state_, tokens, rows, logits);
  cached_.insert(cached_.end(), tokens.begin(), tokens.end());
  if (drafter_ != nullptr) {
    drafter_->append_context(model_.last_taps(), static_cast<int64_t>(tokens.size()));
  }
}

// One decode step through the model's step program (the megakernel unless configured otherwise).
void Generator::step(int32_t token, std::vector<float>& logits) {
  SequenceState* state = state_.get();
  model_.decode(std::span<SequenceState* const>(&state, 1), std::span<const int32_t>(&token, 1),
                logits);
  cached_.push_back(token);
  if (drafter_ != nullptr) drafter_->append_context(model_.last_taps(), 1);
}

bool Generator::prefill(std::span<const int32_t> tokens, bool want_all, GenerationResult& result,
                        std::vector<float>& last_logits, const std::atomic<bool>* cancel) {
  int64_t vocab = model_.vocab_size();
  std::vector<float> logits;
  const auto total = static_cast<int64_t>(tokens.size());
  if (prefill_progress_) prefill_progress_(0, total);
  for (std::size_t begin = 0; begin < tokens.size(); begin += kPrefillChunk) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
    std::size_t end = std::min(tokens.size(), begin + static_cast<std::size_t>(kPrefillChunk));
    feed(tokens.subspan(begin, end - begin), want_all ? LogitRows::kAll : LogitRows::kLast, logits);
    if (prefill_progress_) prefill_progress_(static_cast<int64_t>(end), total);
    if (want_all) {
      // Row r predicts token begin + r + 1.
      for (std::size_t r = 0; r + begin + 1 < tokens.size() && r < end - begin; ++r) {
        std::span<const float> row(logits.data() + r * static_cast<std::size_t>(vocab),
                                   static_cast<std::size_t>(vocab));
        result.prompt_logprobs.push_back(logprob_of(row, tokens[begin + r + 1]));
      }
    }
  }
  std::size_t last_row = logits.size() / static_cast<std::size_t>(vocab) - 1;
  last_logits.assign(
      logits.begin() + static_cast<std::ptrdiff_t>(last_row * static_cast<std::size_t>(vocab)),
      logits.end());
  return true;
}

GenerationResult Generator::generate(const GenerationRequest& request, const TextCallback& on_text,
                                     const std::atomic<bool>* cancel) {
  auto prompt_size = static_cast<int64_t>(request.prompt.size());
  ChoiceDecoder decoder(request, model_.stop_token_ids(), static_cast<int32_t>(model_.vocab_size()),
                        tokenizer_, request.sampling.seed ? *request.sampling.seed : fresh_seed(),
                        context());

  GenerationResult result;
  GenerationStats& stats = result.stats;
  Clock::time_point start = Clock::now();
  stats.prompt_tokens = prompt_size;
  stats.reused_tokens = request.prompt_logprobs ? (reset(), 0) : reuse_prefix(request.prompt);

  std::vector<float> logits;
  std::span<const int32_t> fresh(
      request.prompt.data() + stats.reused_tokens,
      request.prompt.size() - static_cast<std::size_t>(stats.reused_tokens));
  bool prefilled = prefill(fresh, request.prompt_logprobs, result, logits, cancel);
  stats.prefill_seconds = seconds_since(start);
  if (!prefilled) {
    result.finish = FinishReason::kCancelled;
    stats.total_seconds = seconds_since(start);
    return result;
  }

  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
    result.finish = FinishReason::kCancelled;
    stats.total_seconds = seconds_since(start);
    return result;
  }
  TokenOutcome first = decoder.next(logits, state_->position());
  Clock::time_point first_token_at = Clock::now();
  stats.first_token_seconds = seconds_since(start);
  result.finish = drafter_ != nullptr
                      ? decode_speculative(decoder, std::move(first), result, on_text, cancel)
                      : decode_plain(decoder, std::move(first), result, on_text, cancel, logits);
  stats.total_seconds = seconds_since(start);
  stats.decode_seconds = std::chrono::duration<double>(Clock::now() - first_token_at).count();
  return result;
}

bool Generator::emit(const TokenOutcome& outcome, GenerationResult& result,
                     const TextCallback& on_text) {
  ++result.stats.generated_tokens;
  if (outcome.reported) result.tokens.push_back(outcome.token);
  if (!outcome.text.empty()) {
    result.text += outcome.text;
    if (on_text) on_text(outcome.text);
  }
  if (outcome.finished) result.finish = outcome.finish;
  return outcome.finished;
}

FinishReason Generator::decode_plain(ChoiceDecoder& decoder, TokenOutcome outcome,
                                     GenerationResult& result, const TextCallback& on_text,
                                     const std::atomic<bool>* cancel, std::vector<float>& logits) {
  for (;;) {
    if (emit(outcome, result, on_text)) return outcome.finish;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
      return FinishReason::kCancelled;
    step(outcome.token.id, logits);
    outcome = decoder.next(logits, state_->position());
  }
}

// Rounds until the choice finishes (speculative_round.h); each round's tokens are emitted in
// order, and its last token, unless it finished the choice, anchors the next round.
FinishReason Generator::decode_speculative(ChoiceDecoder& decoder, TokenOutcome outcome,
                                           GenerationResult& result, const TextCallback& on_text,
                                           const std::atomic<bool>* cancel) {
  SpeculationStats& spec = result.stats.speculation;
  spec.accepted_at.assign(static_cast<std::size_t>(rounds_->block_size() - 1), 0);
  for (;;) {
    if (emit(outcome, result, on_text)) return outcome.finish;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
      return FinishReason::kCancelled;
    SpeculativeRound round = rounds_->run(*state_, *drafter_, decoder, outcome.token.id, spec);
    cached_.insert(cached_.end(), round.fed.begin(), round.fed.end());
    // Every token but the last is an accepted draft that did not finish the choice.
    for (std::size_t i = 0; i + 1 < round.outcomes.size(); ++i)
      emit(round.outcomes[i], result, on_text);
    outcome = std::move(round.outcomes.back());
  }
}

}  // namespace md::engine
