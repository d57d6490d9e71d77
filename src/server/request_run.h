// One generation request: submits its choices to the scheduler, gathers what the engine produced
// (per choice, through the ChoiceAssembler) and records the request's metrics (queue, prefill,
// time to first token, inter-token latency, decode, end to end, finish reasons). Used from one
// thread at a time (the connection's strand); the engine wakes it when output arrives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/batch_scheduler.h"
#include "engine/request_stream.h"
#include "server/choice_assembler.h"
#include "server/server_context.h"

namespace md::server {

// What one poll produced for one choice.
struct ChoiceUpdate {
  int32_t choice = 0;
  ChoiceDelta delta;
  std::optional<std::vector<engine::ScoredToken>> prompt_scores;
  bool scored = false;               // a prompt-only choice is done
  std::optional<std::string> error;  // the engine failed this choice
};

class RequestRun {
 public:
  using Clock = std::chrono::steady_clock;

  // `prompt_tokens` is the usage count (once per prompt). Throws ApiError (429, 503) when the
  // scheduler does not admit the request.
  RequestRun(ServerContext& context, std::string id, std::vector<engine::ChoiceWork> works,
             std::vector<ChoiceConfig> configs, int64_t prompt_tokens, Clock::time_point arrival);
  ~RequestRun();

  // The engine output pushed since the last poll (never waits), as updates in choice order.
  std::vector<ChoiceUpdate> poll();
  // `wake` is called (from the engine's thread) whenever output arrives; until the run ends.
  void on_output(std::function<void()> wake);
  bool done() const { return open_choices_ == 0; }
  // Cancels every open choice with `reason` ("abort" or "error") in the metrics.
  void cancel(const char* reason);

  int64_t prompt_tokens() const { return prompt_tokens_; }
  // Prompt tokens resumed from the prefix cache, once per prompt: those that none of its choices
  // prefilled (choices of a prompt usually share one prefill; admitted apart, each may resume
  // from another point).
  int64_t cached_tokens() const;
  int64_t completion_tokens() const;
  int64_t reasoning_tokens() const;
  const std::string& id() const { return id_; }

 private:
  struct ChoiceState {
    ChoiceAssembler assembler;
    bool open = true;
    int32_t prompt = 0;
    std::optional<int64_t> cached = std::nullopt;  // resumed prompt tokens, when its prefill ends
    bool first_token_seen = false;
    Clock::time_point assigned{};
    Clock::time_point first_token{};
    Clock::time_point last_emission{};
  };
  void apply(engine::StreamEvent& event, std::vector<ChoiceUpdate>& updates);
  ChoiceUpdate& update_for(int32_t choice, std::vector<ChoiceUpdate>& updates);
  void close_choice(ChoiceState& state, const std::string& reason, Clock::time_point at);

  ServerContext& context_;
  std::string id_;
  std::shared_ptr<engine::RequestStream> stream_;
  std::vector<ChoiceState> choices_;
  int64_t prompt_tokens_ = 0;
  int64_t open_choices_ = 0;
  Clock::time_point arrival_;
};

}  // namespace md::server
