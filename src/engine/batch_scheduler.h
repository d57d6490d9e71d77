// Continuous batching over the engine's independent rows. Requests enter one FIFO queue, bounded
// in requests; each of their choices takes a free row as soon as one exists. One step-loop thread
// alternates prefill (whole chunks of the oldest rows still prefilling, as many as fit in a time
// budget, at least one) with one decode step over every decoding row, so running streams stall
// for at most the budget (or one chunk, if a chunk takes longer) behind a long prompt. A finished
// or cancelled choice frees its row at once.
//
// Batch invariance: a row's prompt is always prefilled in the same chunks (fixed size, counted
// from the prompt's start: the budget only chooses how many whole chunks run between decode
// steps) and its decode arithmetic does not depend on the other rows (the models' decode
// contract), so a request's output is the same alone or beside others, whatever the timing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/batch_scheduler_testing.h"
#include "engine/choice_decoder.h"
#include "engine/generation_request.h"
#include "engine/prefix_cache.h"
#include "engine/request_stream.h"
#include "engine/speculative_round.h"
#include "models/language_model.h"
#include "text/tokenizer.h"

namespace md::engine {

// One choice: what one row computes.
struct ChoiceWork {
  GenerationRequest request;
  uint64_t seed = 0;                 // this choice's random stream (see choice_seed)
  int32_t choice = 0;                // index within its request
  int32_t prompt_top_logprobs = -1;  // >= 0: report the prompt's log-probabilities, with this many
                                     // alternatives per position
  bool generate = true;              // false: prefill (and score) only, no output token
};

struct SchedulerOptions {
  int rows = 8;                 // independent rows (maximum batch)
  int64_t context = 0;          // tokens per row (prompt + output)
  int64_t max_queue = 256;      // waiting requests beyond which submit() refuses
  int64_t prefill_chunk = 256;  // prompt tokens per prefill call: the grain of the prefill
  // Prefill chunks run between two decode steps while they fit in this time (at least one).
  double prefill_budget_ms = 50;
  // The clock the budget and the step-gap figure read (tests pass a simulated one); null: the
  // steady clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Sequence-state memory the rows may hold at once, in bytes (0: no limit). A choice takes a
  // row only when what it can grow to (the model's fixed state plus its prompt and max_tokens in
  // KV blocks) fits beside what the running rows reserved; until then it waits in the queue
  // (first come, first served). Choices that share a prefill share its whole prompt blocks (the
  // KV cache copies on write), so those are reserved once for them all. A choice that could
  // never fit is refused at submit().
  std::size_t state_memory_budget = 0;
  // Speculative decoding: every generating row runs rounds (speculative_round.h) with its own
  // drafter, drafter->new_sequence(); null: rows decode together one token per step. Each row
  // speculating alone keeps rows batch invariant (a row's rounds depend on its request only).
  const SpeculativeDrafter* drafter = nullptr;
  int64_t block_size = 0;          // rows per round; 0: the drafter's
  float confidence_threshold = 0;  // > 0: rounds stop at a less confident draft (0: off)
  // Greedy rows speculate while at most this many rows are generating; beyond that they join
  // one plain decode step together, which reads the weights once for all of them. Greedy tokens
  // are the same either way (verify rows equal decode steps bitwise), so only speed depends on
  // the load. Sampled rows always speculate: their tokens depend on the acceptance draws.
  int64_t spec_max_rows = 1;
  // Bytes of sequence states kept after requests end so that later prompts sharing a prefix
  // resume from them (engine/prefix_cache.h); 0: no prefix cache. Not with a drafter (its
  // context is not cached).
  std::size_t prefix_cache_memory = 0;
  // Prompt tokens between the states a prompt's prefill leaves in the cache, rounded up to
  // whole prefill chunks. Besides these, a prompt leaves the last state a later prompt can
  // resume from exactly (its end, or its last chunk boundary where the model is not split
  // invariant) and a finished answer its end (split-invariant models). A model that can rewind
  // needs no others: any longer state serves.
  int64_t prefix_cache_interval = 256;
  // Called on the step thread after every verify round that carried drafts (metrics).
  std::function<void(int64_t drafted, int64_t accepted)> on_round;
  testing::SchedulerHooks test_hooks;  // test seam (batch_scheduler_testing.h): off by default
};

// What a row is doing, for /slots.
struct SlotInfo {
  int32_t id = 0;
  bool busy = false;
  std::string request_id;
  int64_t prompt_tokens = 0;
  int64_t decoded = 0;
  SamplingParams params;
  int64_t max_tokens = 0;
};

struct SchedulerSnapshot {
  int64_t rows = 0;
  int64_t running_rows = 0;
  int64_t waiting_requests = 0;
  int64_t decode_steps = 0;
  int64_t prefill_tokens = 0;  // prompt tokens run through the model (shared prefills once)
  int64_t spec_rounds = 0;     // verify rounds that carried drafts
  int64_t spec_drafted = 0;
  int64_t spec_accepted = 0;
  double state_usage = 0;                 // tokens held by busy rows / total row capacity
  std::size_t state_memory_reserved = 0;  // by the running rows (state_memory_budget)
  std::size_t state_memory_budget = 0;
  // The longest time between two consecutive decode steps that both had rows decoding: what a
  // running stream waited at worst (prefill, admission, speculation rounds in between).
  double worst_decode_gap_seconds = 0;
  std::vector<SlotInfo> slots;
  std::optional<PrefixCacheStats> prefix_cache;  // null: no prefix cache
};

class BatchScheduler {
 public:
  BatchScheduler(LanguageModel& model, const Tokenizer& tokenizer, SchedulerOptions options);
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  enum class Admission { kAccepted, kQueueFull, kClosed, kTooLarge };
  // Queues every choice of one request (all or none). Thread-safe.
  Admission submit(std::shared_ptr<RequestStream> stream, std::vector<ChoiceWork> choices);

  // Wakes the loop so that a cancelled stream's rows are freed without waiting for a step.
  void notify_cancelled();
  // Refuses new requests from now on (graceful shutdown).
  void close();
  // Cancels everything queued or running with an error event carrying `message`.
  void abort_all(const std::string& message);
  bool idle() const;

  SchedulerSnapshot snapshot() const;
  const SchedulerOptions& options() const { return options_; }
  // The state memory a choice reserves while it runs (SchedulerOptions::state_memory_budget):
  // its own, and its prompt's whole KV blocks, which rows sharing one prefill hold together.
  struct MemoryNeed {
    std::size_t own = 0;
    std::size_t prompt = 0;
    std::size_t total() const { return own + prompt; }
  };
  MemoryNeed state_memory_need(const ChoiceWork& work) const;
  // Drafts per speculative round (block size - 1); 0 without speculation.
  int64_t draft_positions() const { return rounds_ ? rounds_->block_size() - 1 : 0; }

 private:
  struct Queued {
    std::shared_ptr<RequestStream> stream;
    ChoiceWork work;
  };
  struct Row {
    std::unique_ptr<SequenceState> state;
    std::shared_ptr<RequestStream> stream;  // null: free
    ChoiceWork work;
    std::unique_ptr<ChoiceDecoder> decoder;
    int64_t prefilled = 0;   // prompt tokens fed
    int32_t next_token = 0;  // decoding: the token to feed at the next step
    uint64_t admitted = 0;   // admission order (oldest prefill first)
    bool decoding = false;
    // Sibling choices of one prompt share its prefill: a follower waits, without prefilling,
    // for its leader's prompt to be in; it then gets a copy of the leader's state (sharing its
    // KV blocks) and logits.
    Row* leader = nullptr;
    // The memory of the prompt's whole KV blocks, reserved once for a leader and its followers
    // (freed with the last of them).
    std::shared_ptr<const std::size_t> prompt_reserved;
    std::vector<ScoredToken> prompt_scores;
    // The prefix cache: prompt tokens resumed from it, and (where answers are kept) the tokens
    // it generated (what it fed beyond the prompt is their prefix).
    int64_t cached = 0;
    std::vector<int32_t> emitted;
    std::unique_ptr<SpeculativeDrafter> drafter;  // null: no speculation
    SpeculationStats speculation;
    std::size_t reserved = 0;  // state memory held against the budget
    bool speculating = false;  // this step: a round (true) or a row of the plain decode step
  };

  void loop();
  bool has_work_locked() const;
  void handle_abort();
  int64_t held_tokens() const;
  void score_prompt_rows(Row& row, std::size_t begin, std::size_t end);
  // The row whose prefill a queued choice will share, if any: a sibling with the same prompt and
  // prompt scoring that is neither decoding nor itself a follower.
  Row* prefill_leader_for(const Queued& queued);
  // Resumes the row's prompt from the prefix cache's deepest fitting state; the tokens reused.
  int64_t resume_from_cache(Row& row);
  // After a prefill chunk that began at prompt position `begin`: keeps the row's state if a
  // later prompt can resume from it exactly and it is one the cache wants.
  void checkpoint_prefill(Row& row, int64_t begin);
  // Gives the row's state (holding `tokens`) to the prefix cache; a failure there is logged.
  void checkpoint(Row& row, std::span<const int32_t> tokens);
  // A row that finished normally: keeps its state (prompt and answer) for the next turn.
  void checkpoint_turn(Row& row);
  // The prompt is in: scores, then the first token (or the end of a prompt-only choice).
  void finish_prefill(Row& row, std::span<const float> last_logits);
  void reap_cancelled();
  void admit();
  // Whole chunks of the oldest prefilling rows while they fit in the budget (at least one).
  void prefill_within_budget();
  // One chunk of the oldest row still prefilling; false when no row is.
  bool prefill_chunk();
  std::chrono::steady_clock::time_point now() const;
  // Which decoding rows run a round this step (SchedulerOptions::spec_max_rows).
  void plan_speculation();
  void decode_step();
  // Speculating rows: one round each, in turn (a verify step holds one sequence).
  void speculative_rounds();
  void run_round(Row& row);
  void update_decoded_counts();
  void append_step_taps(const std::vector<Row*>& rows);
  // The fault of the test seam (SchedulerOptions::test_hooks).
  void check_fault(const Row& row) const;
  // The scripted output of the test seam: masks every logit but the row's next scripted token.
  void force_scripted_token(const Row& row, std::span<float> logits) const;
  // Samples a row's next token from `logits`, pushes it, and frees the row when it finished.
  // `cached`: set on the prompt's first token (the prompt tokens the row resumed).
  void sample_into(Row& row, std::span<float> logits, std::optional<int64_t> cached = {});
  void fail_row(Row& row, const std::string& message);
  void free_row(Row& row);

  LanguageModel& model_;
  const Tokenizer& tokenizer_;
  SchedulerOptions options_;
  std::vector<int32_t> eos_ids_;
  int32_t vocab_ = 0;

  mutable std::mutex mutex_;  // queue_, waiting_, closed_, stopping_, slots_
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::map<const RequestStream*, int64_t> waiting_;  // queued choices per request
  std::optional<std::string> abort_message_;
  bool closed_ = false;
  bool stopping_ = false;
  std::vector<SlotInfo> slots_;
  std::size_t reserved_ = 0;  // state memory of the running rows (guarded by mutex_)

  std::vector<Row> rows_;  // the loop thread's own
  uint64_t admissions_ = 0;
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> decode_steps_{0};
  std::atomic<int64_t> prefill_tokens_{0};
  std::atomic<int64_t> held_tokens_{0};
  std::optional<std::chrono::steady_clock::time_point> last_decode_;  // null: no row decoded
  std::atomic<double> worst_decode_gap_{0};
  std::vector<float> logits_;
  std::unique_ptr<SpeculativeRounds> rounds_;  // null: no speculation
  std::unique_ptr<PrefixCache> prefix_cache_;  // null: none
  bool keeps_turns_ = false;  // finished answers go to the prefix cache (checkpoint_turn)
  std::atomic<int64_t> spec_rounds_{0};
  std::atomic<int64_t> spec_drafted_{0};
  std::atomic<int64_t> spec_accepted_{0};
  std::thread thread_;
};

}  // namespace md::engine
