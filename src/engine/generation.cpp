#include "engine/generation.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "base/error.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "engine/stop_tokens.h"
#include "text/stream_detokenizer.h"

namespace md::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
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
}

// One decode step through the model's step program (the megakernel unless configured otherwise).
void Generator::step(int32_t token, std::vector<float>& logits) {
  SequenceState* state = state_.get();
  model_.decode(std::span<SequenceState* const>(&state, 1), std::span<const int32_t>(&token, 1),
                logits);
  cached_.push_back(token);
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
  request.sampling.validate();
  auto prompt_size = static_cast<int64_t>(request.prompt.size());
  if (prompt_size == 0) fail("the prompt is empty: at least one token is needed");
  if (prompt_size >= context()) {
    fail(
        "the prompt has {} tokens but the context holds {} (prompt + at least one generated "
        "token); raise --context or shorten the prompt",
        prompt_size, context());
  }
  if (request.max_tokens < 0) fail("max_tokens must be >= 0 (0 = until the context is full)");
  StopStringMatcher stop_strings(request.stop);
  // The model's eos ids stop unless ignore_eos; ids the request names always stop (vLLM).
  StopTokens stop_tokens{request.stop_token_ids, model_.stop_token_ids(), request.ignore_eos};

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

  Sampler sampler(request.sampling, model_.vocab_size(),
                  request.sampling.seed ? *request.sampling.seed : fresh_seed());
  sampler.observe_prompt(request.prompt);
  StreamDetokenizer detokenizer(tokenizer_, request.skip_special);
  Clock::time_point first_token_at{};
  auto emit = [&](std::string_view text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  result.finish = FinishReason::kLength;
  bool stopped_by_string = false;
  for (;;) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      result.finish = FinishReason::kCancelled;
      break;
    }
    GeneratedToken chosen;
    // Log-probabilities cost a copy of the logits (the sampler rewrites them) and a pass over
    // the vocabulary per token: only when asked for.
    bool want_logprobs = request.logprobs || request.top_logprobs > 0;
    std::vector<float> raw;
    if (want_logprobs) {
      raw = logits;
      if (request.top_logprobs > 0) chosen.top = top_logprobs(raw, request.top_logprobs);
    }
    chosen.id = sampler.sample(logits, state_->position());
    if (want_logprobs) chosen.logprob = logprob_of(raw, chosen.id);
    if (stats.generated_tokens == 0) {
      first_token_at = Clock::now();
      stats.first_token_seconds = seconds_since(start);
    }
    if (stop_tokens.is_stop(chosen.id)) {
      result.finish = FinishReason::kStop;
      break;
    }
    result.tokens.push_back(std::move(chosen));
    ++stats.generated_tokens;
    sampler.observe_generated(result.tokens.back().id);
    StopStringOutput piece = stop_strings.push(detokenizer.push(result.tokens.back().id));
    emit(piece.emit);
    if (piece.stopped) {
      result.finish = FinishReason::kStop;
      stopped_by_string = true;
      break;
    }
    bool budget_spent = request.max_tokens > 0 && stats.generated_tokens >= request.max_tokens;
    bool context_full = state_->position() >= state_->capacity();
    if (budget_spent || context_full) break;
    step(result.tokens.back().id, logits);
  }
  if (!stopped_by_string) {
    // Flush what the detokenizer and the stop matcher still hold (an incomplete character, or a
    // partial stop string that never completed).
    StopStringOutput tail = stop_strings.push(detokenizer.finish());
    emit(tail.emit);
    if (!tail.stopped) emit(stop_strings.finish());
  }
  stats.total_seconds = seconds_since(start);
  if (stats.generated_tokens > 0) {
    stats.decode_seconds = std::chrono::duration<double>(Clock::now() - first_token_at).count();
  }
  return result;
}

}  // namespace md::engine
