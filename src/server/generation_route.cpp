#include "server/generation_route.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/choice_decoder.h"

namespace md::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kPingInterval{15};

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

// A generation's response body, pumped by the transport whenever the engine pushed output (and
// about once a second): SSE events as they come, or the whole JSON response at the end.
class GenerationBody : public DeferredBody {
 public:
  GenerationBody(std::shared_ptr<RequestRun> run, std::shared_ptr<ResponseFormatter> formatter,
                 std::shared_ptr<RequestLog> log, std::string request_id, bool stream,
                 bool include_usage)
      : run_(std::move(run)),
        formatter_(std::move(formatter)),
        log_(std::move(log)),
        request_id_(std::move(request_id)),
        stream_(stream),
        include_usage_(include_usage) {}

  void start(std::function<void()> wake) override { run_->on_output(std::move(wake)); }

  bool pump(HttpResponse& res, std::string& out) override {
    return stream_ ? pump_stream(out) : pump_whole(res);
  }

  void abandon() override {
    if (!run_->done()) run_->cancel("abort");
  }

 private:
  bool pump_stream(std::string& out) {
    ResponseFormatter& f = *formatter_;
    if (!opened_) {
      opened_ = true;
      for (const auto& chunk : f.opening_chunks()) out += f.sse_event(chunk);
    }
    for (ChoiceUpdate& update : run_->poll()) {
      if (update.error) {
        run_->cancel("error");
        for (const auto& chunk : f.error_chunks(in_band_error(*update.error, request_id_))) {
          out += f.sse_event(chunk);
        }
        if (f.ends_with_done()) out += "data: [DONE]\n\n";
        return true;
      }
      for (const auto& chunk : f.chunks(update)) out += f.sse_event(chunk);
    }
    if (run_->done()) {
      log_->completion_tokens = run_->completion_tokens();
      for (const auto& chunk : f.closing_chunks(*run_)) out += f.sse_event(chunk);
      if (include_usage_) out += f.sse_event(f.usage_chunk(*run_));
      if (f.ends_with_done()) out += "data: [DONE]\n\n";
      return true;
    }
    // A comment now and then keeps proxies and clients from timing out a queued request.
    if (out.empty() && Clock::now() - last_output_ >= kPingInterval) out = ": ping\n\n";
    if (!out.empty()) last_output_ = Clock::now();
    return false;
  }

  bool pump_whole(HttpResponse& res) {
    for (ChoiceUpdate& update : run_->poll()) {
      if (update.error) {
        run_->cancel("error");
        send_error(res, error_for(*update.error));
        return true;
      }
      formatter_->collect(update);
    }
    if (!run_->done()) return false;
    log_->completion_tokens = run_->completion_tokens();
    send_json(res, formatter_->final_response(*run_));
    return true;
  }

  std::shared_ptr<RequestRun> run_;
  std::shared_ptr<ResponseFormatter> formatter_;
  std::shared_ptr<RequestLog> log_;
  std::string request_id_;  // X-Request-Id, for an in-band internal error
  bool stream_;
  bool include_usage_;
  bool opened_ = false;
  Clock::time_point last_output_ = Clock::now();
};

}  // namespace

std::string ResponseFormatter::sse_event(const nlohmann::ordered_json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

std::vector<nlohmann::ordered_json> ResponseFormatter::closing_chunks(const RequestRun&) {
  return {};
}

std::vector<nlohmann::ordered_json> ResponseFormatter::error_chunks(
    nlohmann::ordered_json error_body) {
  return {std::move(error_body)};
}

int64_t effective_max_tokens(const CommonFields& fields, int64_t prompt_tokens, int64_t context,
                             std::optional<int64_t> server_default, bool chat) {
  int64_t remaining = std::max<int64_t>(0, context - prompt_tokens);
  int64_t wanted = fields.max_tokens ? *fields.max_tokens
                   : server_default  ? *server_default
                   : chat            ? remaining
                                     : 16;
  return std::min(wanted, remaining);
}

std::shared_ptr<grammar::TokenConstraint> compile_constraint(
    const CommonFields& fields, ServerContext& context, const std::vector<std::string>& markers) {
  if (!fields.grammar) return nullptr;
  try {
    return context.constraints->get(*fields.grammar, markers);
  } catch (const Error& e) {
    throw invalid_value_message(fields.grammar_param, e.what());
  }
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

void respond(const HttpRequest& req, HttpResponse& res, std::shared_ptr<RequestRun> run,
             std::shared_ptr<ResponseFormatter> formatter, bool stream, bool include_usage) {
  res.deferred =
      std::make_shared<GenerationBody>(std::move(run), std::move(formatter), req.log,
                                       res.header("X-Request-Id"), stream, include_usage);
  if (!stream) return;
  res.streamed = true;
  // The bare type, as served since the first release (clients and tests compare it); SSE is UTF-8
  // by definition, so a charset parameter adds nothing.
  res.set_header("Content-Type", "text/event-stream");
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
}

}  // namespace md::server
