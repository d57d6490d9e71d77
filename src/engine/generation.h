// One generation request run on one sequence: prefill (in chunks, reusing the cached prefix when
// the prompt extends what the sequence already holds), then the decode loop with sampling, stop
// tokens, stop strings, max_tokens, the context limit and cancellation; text streamed as produced.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/choice_decoder.h"
#include "engine/generation_request.h"
#include "engine/logprobs.h"
#include "engine/sampling_params.h"
#include "engine/speculative_round.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"
#include "text/tokenizer.h"

namespace md::engine {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;     // prompt tokens already in the sequence (not recomputed)
  int64_t generated_tokens = 0;  // sampled, the token that ended the choice included (usage)
  double prefill_seconds = 0;
  double first_token_seconds = 0;  // request start → first token chosen
  double decode_seconds = 0;       // first token → end
  double total_seconds = 0;
  SpeculationStats speculation;
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // tokens after the first per second of decoding
};

struct GenerationResult {
  std::vector<GeneratedToken> tokens;
  std::string text;
  FinishReason finish = FinishReason::kStop;
  std::vector<float> prompt_logprobs;  // size prompt-1 when requested
  GenerationStats stats;
};

using TextCallback = std::function<void(std::string_view)>;

class Generator {
 public:
  // `context` is the sequence capacity in tokens (prompt + generated).
  Generator(LanguageModel& model, const Tokenizer& tokenizer, int64_t context);

  // Throws md::Error before any work on a bad request (prompt empty or longer than the context,
  // invalid sampling parameters or stop strings).
  GenerationResult generate(const GenerationRequest& request, const TextCallback& on_text,
                            const std::atomic<bool>* cancel = nullptr);

  void reset();

  // Speculative decoding with `drafter` (null: off). The model must have verify rows; its tap
  // layers are set to the drafter's. block_size: rows per round (2..the drafter's; 0 = the
  // drafter's). force_accept (benchmarks only): every round takes exactly force_accept-1 drafts
  // and then the target's own token, to time rounds at that acceptance length; output is then
  // not the model's. confidence_threshold > 0: rounds stop their block at the first draft whose
  // confidence is below it (speculative_round.h).
  void set_drafter(SpeculativeDrafter* drafter, int64_t block_size = 0, int64_t force_accept = 0,
                   float confidence_threshold = 0);
  int64_t context() const { return state_->capacity(); }
  // The tokens the sequence holds (processed by the model).
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  const SequenceState& state() const { return *state_; }

  static constexpr int64_t kPrefillChunk = 256;

  // Told how a prompt's prefill advances: (0, total) before its first chunk, then the tokens
  // computed after each chunk (total: the prompt tokens to compute, a reused prefix excluded).
  using PrefillProgress = std::function<void(int64_t done, int64_t total)>;
  void set_prefill_progress(PrefillProgress progress) { prefill_progress_ = std::move(progress); }

 private:
  PrefillProgress prefill_progress_;
  int64_t reuse_prefix(const std::vector<int32_t>& prompt);
  // Returns false when cancelled between chunks (the sequence then holds a prefix of the prompt).
  bool prefill(std::span<const int32_t> tokens, bool want_all, GenerationResult& result,
               std::vector<float>& last_logits, const std::atomic<bool>* cancel);
  void feed(std::span<const int32_t> tokens, LogitRows rows, std::vector<float>& logits);
  void step(int32_t token, std::vector<float>& logits);
  // The decode loop after the first token; returns the finish reason.
  FinishReason decode_plain(ChoiceDecoder& decoder, TokenOutcome first, GenerationResult& result,
                            const TextCallback& on_text, const std::atomic<bool>* cancel,
                            std::vector<float>& logits);
  FinishReason decode_speculative(ChoiceDecoder& decoder, TokenOutcome first,
                                  GenerationResult& result, const TextCallback& on_text,
                                  const std::atomic<bool>* cancel);
  // Appends a token's output to the result; true when the choice finished.
  bool emit(const TokenOutcome& outcome, GenerationResult& result, const TextCallback& on_text);

  LanguageModel& model_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<SequenceState> state_;
  std::vector<int32_t> cached_;
  SpeculativeDrafter* drafter_ = nullptr;
  std::unique_ptr<SpeculativeRounds> rounds_;
};

}  // namespace md::engine
