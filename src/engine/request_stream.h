// The channel between one request's client side (an HTTP handler thread) and the scheduler's step
// loop: the engine pushes what each step produced for the request's choices; the client waits for
// it, and may cancel (a disconnect), which the engine honours at its next step boundary.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/choice_decoder.h"
#include "engine/logprobs.h"

namespace md::engine {

using SteadyClock = std::chrono::steady_clock;

struct StreamEvent {
  enum class Kind {
    kRowAssigned,     // the choice got a row: queue time ends, prefill starts
    kPromptLogprobs,  // the prompt's log-probabilities (entry t scores prompt[t + 1])
    kToken,           // one sampled token and what it released
    kScored,          // a prompt-only choice (max_tokens 0) is done
    kError,           // the choice failed inside the engine; nothing more comes for it
  };
  Kind kind = Kind::kToken;
  int32_t choice = 0;
  TokenOutcome outcome;                      // kToken
  std::vector<ScoredToken> prompt_logprobs;  // kPromptLogprobs
  std::string error;                         // kError
  SteadyClock::time_point at = SteadyClock::now();
  // kToken: how many tokens the step produced for this choice (a speculative round's accepted
  // drafts and correction). They all carry the same `at`, so latency metrics count the step once
  // and spread its time over its tokens.
  int32_t step_tokens = 1;
  // On the event that ends a choice's prefill (its first kToken, or kScored): the prompt's first
  // tokens it resumed from the prefix cache instead of prefilling.
  std::optional<int64_t> cached_tokens;

  static StreamEvent of(Kind kind, int32_t choice) {
    StreamEvent event;
    event.kind = kind;
    event.choice = choice;
    return event;
  }
};

class RequestStream {
 public:
  explicit RequestStream(std::string id = {}) : id_(std::move(id)) {}

  const std::string& id() const { return id_; }

  // Engine side.
  void push(StreamEvent event);
  void push_all(std::vector<StreamEvent> events);

  // Client side: everything pushed so far, waiting up to `timeout` when nothing is there yet.
  std::vector<StreamEvent> wait(std::chrono::milliseconds timeout);
  // Client side: `listener` is called (on the engine's thread, briefly) after each push, so an
  // event-driven client need not wait. Once set_listener returns, a previous listener is never
  // called again; an empty one removes it.
  void set_listener(std::function<void()> listener);

  // Either side. Cancelling is permanent; the scheduler drops the request's queued and running
  // choices at its next step boundary and pushes nothing more.
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Cancels one choice (the client side ended it early, e.g. after the first tool call).
  void cancel_choice(int32_t choice);
  bool cancelled(int32_t choice) const;

 private:
  std::string id_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::function<void()> listener_;  // guarded by mutex_
  mutable std::mutex cancelled_choices_mutex_;
  std::vector<int32_t> cancelled_choices_;
};

}  // namespace md::engine
