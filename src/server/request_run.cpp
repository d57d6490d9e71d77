#include "server/request_run.h"

#include <algorithm>
#include <map>

namespace md::server {
namespace {

double seconds(RequestRun::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RequestRun::RequestRun(ServerContext& context, std::string id,
                       std::vector<engine::ChoiceWork> works, std::vector<ChoiceConfig> configs,
                       int64_t prompt_tokens, Clock::time_point arrival)
    : context_(context),
      id_(std::move(id)),
      stream_(std::make_shared<engine::RequestStream>(id_)),
      prompt_tokens_(prompt_tokens),
      open_choices_(static_cast<int64_t>(works.size())),
      arrival_(arrival) {
  choices_.reserve(configs.size());
  for (ChoiceConfig& config : configs) {
    const int32_t prompt = config.prompt;
    choices_.push_back({ChoiceAssembler(std::move(config))});
    choices_.back().prompt = prompt;
  }
  switch (context_.scheduler->submit(stream_, std::move(works))) {
    case engine::BatchScheduler::Admission::kAccepted:
      break;
    case engine::BatchScheduler::Admission::kQueueFull:
      open_choices_ = 0;
      throw queue_full(static_cast<std::size_t>(context_.options.max_queue));
    case engine::BatchScheduler::Admission::kClosed:
      open_choices_ = 0;
      throw unavailable(Unavailable::kShuttingDown);
    case engine::BatchScheduler::Admission::kTooLarge:
      open_choices_ = 0;
      throw state_memory_exceeded(context_.options.kv_memory_bytes);
  }
  context_.metrics.prompt_tokens(prompt_tokens_);
}

RequestRun::~RequestRun() {
  // The engine keeps the stream a while after the run ends: it must not call into a connection
  // that is gone.
  stream_->set_listener({});
  // A handler that leaves early (an exception, a write failure) never leaves rows running.
  if (open_choices_ > 0) cancel("abort");
}

void RequestRun::on_output(std::function<void()> wake) {
  stream_->set_listener(std::move(wake));
}

int64_t RequestRun::cached_tokens() const {
  std::map<int32_t, int64_t> per_prompt;
  for (const ChoiceState& c : choices_) {
    if (!c.cached) continue;  // failed or cancelled before its prompt was in
    auto [entry, added] = per_prompt.emplace(c.prompt, *c.cached);
    if (!added) entry->second = std::min(entry->second, *c.cached);
  }
  int64_t total = 0;
  for (const auto& [prompt, cached] : per_prompt) total += cached;
  return total;
}

int64_t RequestRun::completion_tokens() const {
  int64_t total = 0;
  for (const ChoiceState& c : choices_) total += c.assembler.completion_tokens();
  return total;
}

int64_t RequestRun::reasoning_tokens() const {
  int64_t total = 0;
  for (const ChoiceState& c : choices_) total += c.assembler.reasoning_tokens();
  return total;
}

void RequestRun::cancel(const char* reason) {
  stream_->cancel();
  context_.scheduler->notify_cancelled();
  for (ChoiceState& c : choices_) {
    if (c.open) close_choice(c, reason, Clock::now());
  }
}

void RequestRun::close_choice(ChoiceState& state, const std::string& reason, Clock::time_point at) {
  state.open = false;
  --open_choices_;
  // Counted when the request ends: a later choice may have resumed from less.
  if (open_choices_ == 0) context_.metrics.prompt_tokens(0, cached_tokens());
  context_.metrics.choice_finished(reason);
  context_.metrics.observe_request_generation_tokens(state.assembler.completion_tokens());
  if (reason == "abort" || reason == "error") return;
  context_.metrics.observe_e2e(seconds(at - arrival_));
  if (state.first_token_seen) context_.metrics.observe_decode(seconds(at - state.first_token));
}

ChoiceUpdate& RequestRun::update_for(int32_t choice, std::vector<ChoiceUpdate>& updates) {
  for (ChoiceUpdate& u : updates) {
    if (u.choice == choice) return u;
  }
  updates.push_back({});
  updates.back().choice = choice;
  return updates.back();
}

void RequestRun::apply(engine::StreamEvent& event, std::vector<ChoiceUpdate>& updates) {
  ChoiceState& state = choices_.at(static_cast<std::size_t>(event.choice));
  if (!state.open) return;  // output after a cancel or a parser-ended choice
  if (event.cached_tokens) state.cached = event.cached_tokens;
  using Kind = engine::StreamEvent::Kind;
  switch (event.kind) {
    case Kind::kRowAssigned:
      state.assigned = event.at;
      context_.metrics.observe_queue(seconds(event.at - arrival_));
      return;
    case Kind::kPromptLogprobs:
      update_for(event.choice, updates).prompt_scores = std::move(event.prompt_logprobs);
      return;
    case Kind::kScored: {
      // A prompt-only choice (max_tokens 0) ends at its limit without output.
      ChoiceUpdate& update = update_for(event.choice, updates);
      update.scored = true;
      update.delta.finished = true;
      update.delta.finish_reason = "length";
      close_choice(state, "length", event.at);
      return;
    }
    case Kind::kError:
      update_for(event.choice, updates).error = event.error;
      close_choice(state, "error", event.at);
      return;
    case Kind::kToken:
      break;
  }
  if (!state.first_token_seen) {
    state.first_token_seen = true;
    state.first_token = event.at;
    context_.metrics.observe_ttft(seconds(event.at - arrival_));
    context_.metrics.observe_prefill(seconds(event.at - state.assigned));
  } else if (event.at != state.last_emission) {
    // The first event of a step; the step's other tokens share its `at` and are counted here.
    context_.metrics.observe_inter_token(seconds(event.at - state.last_emission),
                                         event.step_tokens);
  }
  state.last_emission = event.at;
  context_.metrics.generation_tokens(1);
  ChoiceUpdate& update = update_for(event.choice, updates);
  update.delta.append(state.assembler.add(event.outcome));
  if (state.assembler.wants_stop()) stream_->cancel_choice(event.choice);
  if (state.assembler.finished()) close_choice(state, update.delta.finish_reason, event.at);
}

std::vector<ChoiceUpdate> RequestRun::poll() {
  std::vector<ChoiceUpdate> updates;
  if (open_choices_ == 0) return updates;
  for (engine::StreamEvent& event : stream_->wait(std::chrono::milliseconds(0)))
    apply(event, updates);
  std::sort(updates.begin(), updates.end(),
            [](const ChoiceUpdate& a, const ChoiceUpdate& b) { return a.choice < b.choice; });
  return updates;
}

}  // namespace md::server
