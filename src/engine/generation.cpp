#include "engine/generation.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/choice_decoder.h"
#include "engine/counter_rng.h"

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

void Generator::set_drafter(SpeculativeDrafter* drafter, int64_t block_size,
                            int64_t force_accept) {
  drafter_ = drafter;
  reset();
  if (drafter == nullptr) return;
  if (!model_.supports_verify()) {
    fail("speculative decoding needs verify rows, which {} does not have", model_.description());
  }
  if (block_size == 0) block_size = drafter->block_size();
  if (block_size < 2 || block_size > drafter->block_size()) {
    fail("--block-size must be between 2 and the drafter's {}, got {}", drafter->block_size(),
         block_size);
  }
  if (force_accept < 0 || force_accept > block_size) {
    fail("--force-accept must be between 1 and the block size {}, got {}", block_size,
         force_accept);
  }
  block_size_ = block_size;
  force_accept_ = force_accept;
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
  for (std::size_t begin = 0; begin < tokens.size(); begin += kPrefillChunk) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
    std::size_t end = std::min(tokens.size(), begin + static_cast<std::size_t>(kPrefillChunk));
    feed(tokens.subspan(begin, end - begin), want_all ? LogitRows::kAll : LogitRows::kLast, logits);
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
  ChoiceDecoder decoder(request, model_.stop_token_ids(),
                        static_cast<int32_t>(model_.vocab_size()), tokenizer_,
                        request.sampling.seed ? *request.sampling.seed : fresh_seed(), context());

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
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return FinishReason::kCancelled;
    step(outcome.token.id, logits);
    outcome = decoder.next(logits, state_->position());
  }
}

// One round: the drafter proposes block-1 tokens after the anchor, the target verifies the
// anchor and the drafts in one step (verify rows), the choice decoder accepts the longest
// agreeing prefix (greedy) or applies the lossless rejection rule (sampled), and the sequence
// keeps the anchor plus the accepted drafts. The token after them (the target's correction or
// its bonus) is the next anchor.
FinishReason Generator::decode_speculative(ChoiceDecoder& decoder, TokenOutcome outcome,
                                           GenerationResult& result, const TextCallback& on_text,
                                           const std::atomic<bool>* cancel) {
  SpeculationStats& spec = result.stats.speculation;
  spec.accepted_at.assign(static_cast<std::size_t>(block_size_ - 1), 0);
  const auto vocab = static_cast<std::size_t>(model_.vocab_size());
  const float temperature =
      decoder.greedy() ? 0.0f : std::max(kGreedyTemperature, decoder.temperature());
  std::vector<float> logits;
  for (;;) {
    if (emit(outcome, result, on_text)) return outcome.finish;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return FinishReason::kCancelled;
    const int32_t anchor = outcome.token.id;
    const int64_t s = state_->position();
    const int64_t rows = std::min(block_size_, state_->capacity() - s);
    if (rows < 2) {  // no room for a block: one plain step
      step(anchor, logits);
      outcome = decoder.next(logits, state_->position());
      continue;
    }
    Clock::time_point draft_start = Clock::now();
    std::vector<double> uniforms;
    for (int64_t i = 1; i < rows; ++i) uniforms.push_back(uniform_at_lane(decoder.seed(), s + i, 3));
    DraftProposal proposal = drafter_->propose(anchor, temperature, uniforms);
    Clock::time_point verify_start = Clock::now();
    spec.draft_seconds += std::chrono::duration<double>(verify_start - draft_start).count();
    std::vector<int32_t> block{anchor};
    block.insert(block.end(), proposal.tokens.begin(), proposal.tokens.begin() + (rows - 1));
    model_.verify(*state_, block, logits);
    spec.verify_seconds += seconds_since(verify_start);
    ++spec.rounds;
    spec.drafted += rows - 1;

    // Row i of the verify logits predicts position s + i + 1.
    int64_t kept = 1;  // rows the sequence keeps: the anchor, then each accepted draft
    bool finished = false;
    for (int64_t i = 0; i < rows; ++i) {
      std::span<float> row(logits.data() + static_cast<std::size_t>(i) * vocab, vocab);
      const int64_t position = s + i + 1;
      bool accepted = false;
      if (i + 1 < rows) {
        const int32_t draft = block[static_cast<std::size_t>(i + 1)];
        if (force_accept_ > 0) {
          // Benchmark: exactly force_accept-1 drafts are taken, then the target's own token.
          accepted = i + 1 < force_accept_;
          outcome = accepted ? decoder.force(draft) : decoder.next(row, position);
        } else {
          outcome = decoder.verify_draft(row, position, draft,
                                         proposal.q[static_cast<std::size_t>(i)], accepted);
        }
      } else {
        outcome = decoder.next(row, position);  // every draft accepted: the bonus token
      }
      if (!accepted) break;  // the correction or the bonus: the next anchor
      ++spec.accepted;
      ++spec.accepted_at[static_cast<std::size_t>(i)];
      if (emit(outcome, result, on_text)) {
        finished = true;  // a finishing token is never fed (as in plain decoding)
        break;
      }
      ++kept;
    }
    model_.commit(*state_, kept);
    std::span<const float> taps = model_.last_taps();
    drafter_->append_context(taps.subspan(0, taps.size() / static_cast<std::size_t>(rows) *
                                                 static_cast<std::size_t>(kept)),
                             kept);
    cached_.insert(cached_.end(), block.begin(), block.begin() + kept);
    spec.produced += kept;
    if (finished) return outcome.finish;
  }
}

}  // namespace md::engine
