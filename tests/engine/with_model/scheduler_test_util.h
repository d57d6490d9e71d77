// Helpers of the scheduler tests: one choice's collected output, waiting for a request's choices
// to finish, and a choice's work item.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/batch_scheduler.h"

namespace md::test {

using engine::BatchScheduler;
using engine::ChoiceWork;
using engine::RequestStream;
using engine::StreamEvent;

struct ChoiceResult {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string text;
  engine::FinishReason finish = engine::FinishReason::kLength;
  std::string error;
  std::vector<engine::ScoredToken> prompt_scores;
  bool scored = false;
  int64_t cached = 0;  // prompt tokens resumed from the prefix cache
  engine::SteadyClock::time_point assigned{}, finished{};  // row assigned; the choice ended
};

// Waits until `needed` choices of the stream finished (a finished token, a scored prompt or an
// error): all of them unless said. `observe` sees each event first (a test may cancel on one).
inline std::vector<ChoiceResult> collect(
    RequestStream& stream, std::size_t choices, std::size_t needed = 0,
    const std::function<void(const StreamEvent&)>& observe = nullptr) {
  if (needed == 0) needed = choices;
  std::vector<ChoiceResult> results(choices);
  std::size_t done = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (done < needed && std::chrono::steady_clock::now() < deadline) {
    for (StreamEvent& e : stream.wait(std::chrono::milliseconds(100))) {
      if (observe) observe(e);
      ChoiceResult& r = results.at(static_cast<std::size_t>(e.choice));
      const std::size_t done_before = done;
      if (e.cached_tokens) r.cached = *e.cached_tokens;
      switch (e.kind) {
        case StreamEvent::Kind::kToken:
          if (e.outcome.reported) {
            r.ids.push_back(e.outcome.token.id);
            r.logprobs.push_back(e.outcome.token.logprob);
          }
          r.text += e.outcome.text;
          if (e.outcome.finished) {
            r.finish = e.outcome.finish;
            ++done;
          }
          break;
        case StreamEvent::Kind::kPromptLogprobs:
          r.prompt_scores = e.prompt_logprobs;
          break;
        case StreamEvent::Kind::kScored:
          r.scored = true;
          ++done;
          break;
        case StreamEvent::Kind::kError:
          r.error = e.error;
          ++done;
          break;
        case StreamEvent::Kind::kRowAssigned:
          r.assigned = e.at;
          break;
      }
      if (done != done_before) r.finished = e.at;
    }
  }
  EXPECT_EQ(done, needed) << "timed out waiting for the scheduler";
  return results;
}

inline ChoiceWork make_work(std::vector<int32_t> prompt, int64_t max_tokens, float temperature,
                            uint64_t seed) {
  ChoiceWork work;
  work.request.prompt = std::move(prompt);
  work.request.max_tokens = max_tokens;
  work.request.sampling.temperature = temperature;
  work.request.ignore_eos = true;
  work.request.logprobs = true;
  work.seed = seed;
  return work;
}

}  // namespace md::test
