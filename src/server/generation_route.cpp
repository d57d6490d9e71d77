#include "server/generation_route.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "engine/choice_decoder.h"

namespace md::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPollInterval{100};
constexpr std::chrono::seconds kPingInterval{15};

std::string sse_event(const nlohmann::ordered_json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

ApiError error_for(const std::string& engine_error) {
  if (engine_error == kShutdownMessage) return unavailable(Unavailable::kShuttingDown);
  return internal_error(engine_error);
}

// An in-band error after the stream started (§9): the error object as an event.
nlohmann::ordered_json in_band_error(const std::string& engine_error,
                                     const std::string& request_id) {
  ApiError error = with_request_id(error_for(engine_error), request_id);
  nlohmann::ordered_json body = error.body();
  if (error.status == 503) {
    body["error"]["type"] = "server_error";
  }
  return body;
}

// The state a streaming response keeps between provider calls.
struct StreamState {
  std::shared_ptr<RequestRun> run;
  std::shared_ptr<ResponseFormatter> formatter;
  std::string request_id;  // X-Request-Id, for an in-band internal error
  bool include_usage = false;
  bool opened = false;
  Clock::time_point last_write = Clock::now();
};

bool write(httplib::DataSink& sink, StreamState& state, const std::string& text) {
  state.last_write = Clock::now();
  return sink.write(text.data(), text.size());
}

void finish_stream(httplib::DataSink& sink, StreamState& state) {
  if (state.include_usage) {
    (void)write(sink, state, sse_event(state.formatter->usage_chunk(*state.run)));
  }
  (void)write(sink, state, "data: [DONE]\n\n");
  sink.done();
}

// One provider call: opening chunks the first time, then one poll's worth of events.
bool stream_step(httplib::DataSink& sink, StreamState& state) {
  if (!state.opened) {
    state.opened = true;
    for (const auto& chunk : state.formatter->opening_chunks()) {
      if (!write(sink, state, sse_event(chunk))) return false;
    }
  }
  if (state.run->client_gone()) return false;
  std::vector<ChoiceUpdate> updates = state.run->poll(kPollInterval);
  for (ChoiceUpdate& update : updates) {
    if (update.error) {
      state.run->cancel("error");
      (void)write(sink, state, sse_event(in_band_error(*update.error, state.request_id)));
      (void)write(sink, state, "data: [DONE]\n\n");
      sink.done();
      return true;
    }
    for (const auto& chunk : state.formatter->chunks(update)) {
      if (!write(sink, state, sse_event(chunk))) {
        state.run->cancel("abort");
        return false;
      }
    }
  }
  if (state.run->done()) {
    current_request_log().completion_tokens = state.run->completion_tokens();
    finish_stream(sink, state);
    return true;
  }
  if (Clock::now() - state.last_write >= kPingInterval && !write(sink, state, ": ping\n\n")) {
    state.run->cancel("abort");
    return false;
  }
  return true;
}

void respond_json(httplib::Response& res, RequestRun& run, ResponseFormatter& formatter) {
  while (!run.done()) {
    if (run.client_gone()) {
      // Nothing more is written to a client that left; the connection is closed.
      res.status = 499;
      res.set_header("Connection", "close");
      return;
    }
    for (ChoiceUpdate& update : run.poll(kPollInterval)) {
      if (update.error) {
        run.cancel("error");
        send_error(res, error_for(*update.error));
        return;
      }
      formatter.collect(update);
    }
  }
  current_request_log().completion_tokens = run.completion_tokens();
  send_json(res, formatter.final_response(run));
}

}  // namespace

int64_t effective_max_tokens(const CommonFields& fields, int64_t prompt_tokens, int64_t context,
                             std::optional<int64_t> server_default, bool chat) {
  int64_t remaining = std::max<int64_t>(0, context - prompt_tokens);
  int64_t wanted = fields.max_tokens ? *fields.max_tokens
                   : server_default  ? *server_default
                   : chat            ? remaining
                                     : 16;
  return std::min(wanted, remaining);
}

engine::GenerationRequest make_engine_request(const CommonFields& fields, const ServedModel& model,
                                              std::vector<int32_t> prompt, int64_t max_tokens,
                                              bool logprobs, int64_t top_logprobs) {
  engine::GenerationRequest request;
  request.prompt = std::move(prompt);
  engine::SamplingParams& s = request.sampling;
  s = model.sampling_defaults;
  s.seed.reset();
  if (fields.temperature) s.temperature = static_cast<float>(*fields.temperature);
  if (fields.top_p) s.top_p = static_cast<float>(*fields.top_p);
  if (fields.top_k) s.top_k = static_cast<int32_t>(std::min<int64_t>(*fields.top_k, INT32_MAX));
  if (fields.min_p) s.min_p = static_cast<float>(*fields.min_p);
  if (fields.presence_penalty) s.presence_penalty = static_cast<float>(*fields.presence_penalty);
  if (fields.frequency_penalty) s.frequency_penalty = static_cast<float>(*fields.frequency_penalty);
  if (fields.repetition_penalty) {
    s.repetition_penalty = static_cast<float>(*fields.repetition_penalty);
  }
  // A top_k at or beyond the vocabulary keeps everything: the same as off.
  if (s.top_k >= model.model->vocab_size()) s.top_k = 0;
  request.max_tokens = max_tokens;
  request.stop = fields.stop;
  request.stop_token_ids = fields.stop_token_ids;
  request.ignore_eos = fields.ignore_eos;
  request.skip_special = fields.skip_special_tokens;
  request.logprobs = logprobs;
  request.top_logprobs = static_cast<int32_t>(top_logprobs);
  request.min_tokens = fields.min_tokens;
  request.logit_bias = fields.logit_bias;
  request.include_stop_str_in_output = fields.include_stop_str_in_output;
  return request;
}

uint64_t request_seed(const CommonFields& fields) {
  return fields.seed ? static_cast<uint64_t>(*fields.seed) : engine::fresh_seed();
}

ClientWatch watch_client(const httplib::Request& req) {
  return ClientWatch(req.local_port, req.remote_addr, req.remote_port);
}

void respond(ServerContext&, const httplib::Request&, httplib::Response& res,
             std::shared_ptr<RequestRun> run, std::shared_ptr<ResponseFormatter> formatter,
             bool stream, bool include_usage) {
  if (!stream) {
    respond_json(res, *run, *formatter);
    return;
  }
  auto state = std::make_shared<StreamState>();
  state->run = std::move(run);
  state->formatter = std::move(formatter);
  state->include_usage = include_usage;
  state->request_id = res.get_header_value("X-Request-Id");
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Connection", "keep-alive");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      // Not "text/event-stream; charset=utf-8": cpp-httplib 0.11 gzips every text/* type but
      // exactly this one when the client accepts gzip, and its gzip stream holds events back
      // until the end. SSE is UTF-8 by definition, so the parameter adds nothing.
      "text/event-stream",
      [state](std::size_t, httplib::DataSink& sink) { return stream_step(sink, *state); },
      [state](bool) {
        // The run's destructor cancels whatever is still open (a client that went away).
        state->run.reset();
      });
}

}  // namespace md::server
