// What the chat and completions routes share: turning the request's common fields into the
// engine's per-choice work, and driving a RequestRun to a JSON response or an SSE stream while
// a route-specific formatter shapes the objects.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/generation_request.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/request_run.h"
#include "server/server_context.h"

namespace md::server {

// The message of the error event the scheduler sends when a shutdown cancels running choices.
inline constexpr const char* kShutdownMessage = "The server is shutting down.";

// max_tokens after the defaults (§2.2: chat → the rest of the context, completions → 16, unless
// --default-max-tokens) and the clamp to what the context leaves after the prompt.
int64_t effective_max_tokens(const CommonFields& fields, int64_t prompt_tokens, int64_t context,
                             std::optional<int64_t> server_default, bool chat);

// The engine request for one prompt: the model's sampling defaults overridden by the request.
engine::GenerationRequest make_engine_request(const CommonFields& fields, const ServedModel& model,
                                              std::vector<int32_t> prompt, int64_t max_tokens,
                                              bool logprobs, int64_t top_logprobs);

// The request's grammar compiled for the served vocabulary (cached by text), or null without one;
// a grammar that does not parse is a 400 naming the field it came from (§15).
// `markers`: added tokens the grammar may write as their text (the tool-call tags).
std::shared_ptr<grammar::TokenConstraint> compile_constraint(
    const CommonFields& fields, ServerContext& context,
    const std::vector<std::string>& markers = {});

// The request's seed (a fresh one when absent; negative seeds as two's complement).
uint64_t request_seed(const CommonFields& fields);

class ResponseFormatter {
 public:
  virtual ~ResponseFormatter() = default;
  // Events sent as soon as the request is admitted (chat: one role chunk per choice).
  virtual std::vector<nlohmann::ordered_json> opening_chunks() = 0;
  // Chunks for what one poll produced for one choice (streaming).
  virtual std::vector<nlohmann::ordered_json> chunks(ChoiceUpdate& update) = 0;
  // Non-streaming: folds one update into the final response.
  virtual void collect(ChoiceUpdate& update) = 0;
  virtual nlohmann::ordered_json final_response(const RequestRun& run) = 0;
  virtual nlohmann::ordered_json usage(const RequestRun& run) = 0;
  // The chunk that carries the usage (choices: []).
  virtual nlohmann::ordered_json usage_chunk(const RequestRun& run) = 0;

  // Stream framing. The defaults are chat's and completions': `data:` lines, the usage chunk
  // when asked, then `data: [DONE]`; an error after the stream started is the error object.
  // The Responses API (§14) names each event's type and ends with its own final event.
  virtual std::string sse_event(const nlohmann::ordered_json& payload);
  // Events after the last choice finished, before the usage chunk.
  virtual std::vector<nlohmann::ordered_json> closing_chunks(const RequestRun& run);
  // The events that report a failure after the stream started (`error_body`: {"error": {...}}).
  virtual std::vector<nlohmann::ordered_json> error_chunks(nlohmann::ordered_json error_body);
  virtual bool ends_with_done() const { return true; }

 protected:
  // The response's "created": when the request was admitted (Unix seconds), shared by all its
  // chunks as OpenAI's are.
  const int64_t created_ = unix_seconds_now();
};

// Makes `res` the request's response: a deferred body that the transport pumps as the engine
// produces output — the JSON response when the run ends, or an SSE stream (headers out now,
// events as they come, the usage chunk when asked, then [DONE]).
void respond(const HttpRequest& req, HttpResponse& res, std::shared_ptr<RequestRun> run,
             std::shared_ptr<ResponseFormatter> formatter, bool stream, bool include_usage);

}  // namespace md::server
