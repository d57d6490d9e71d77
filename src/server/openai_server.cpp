#include "server/openai_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "server/generation_route.h"
#include "server/routes.h"

namespace md::server {
namespace {

using Handler = void (*)(ServerContext&, const HttpRequest&, HttpResponse&);

struct Route {
  std::vector<std::string> paths;  // the /v1 path first, then its aliases
  const char* method;              // or a list, "GET, DELETE" (as the Allow header lists it)
  Handler handler;
  bool authenticated;
  bool inline_probe = false;  // quick and never blocking: answered on the event loop
};

// Every route of §1; each /v1/X also answers at /X.
const std::vector<Route>& route_table() {
  static const std::vector<Route> routes = {
      {{"/health", "/v1/health", "/ping"}, "GET", &handle_health, false, true},
      {{"/"}, "GET", &handle_chat_page, false, true},
      {{"/metrics"}, "GET", &handle_metrics, false, true},
      // §0 promises /v1/models within 100 ms under load too: it only lists names.
      {{"/v1/models", "/models"}, "GET", &handle_models, true, true},
      {{"/v1/models/([^/]+)", "/models/([^/]+)"}, "GET", &handle_model, true, true},
      {{"/tokenize"}, "POST", &handle_tokenize, true},
      {{"/detokenize"}, "POST", &handle_detokenize, true},
      {{"/v1/completions", "/completions"}, "POST", &handle_completions, true},
      {{"/v1/chat/completions", "/chat/completions"}, "POST", &handle_chat, true},
      {{"/v1/responses", "/responses"}, "POST", &handle_responses, true},
      {{"/v1/responses/([^/]+)", "/responses/([^/]+)"},
       "GET, DELETE",
       &handle_response_by_id,
       true},
      {{"/version"}, "GET", &handle_version, true},
      {{"/props"}, "GET", &handle_props, true},
      {{"/slots"}, "GET", &handle_slots, true},
  };
  return routes;
}

// Whether the route takes `method` (one of the methods its list names).
bool allows(const Route& route, std::string_view method) {
  std::string_view list = route.method;
  while (!list.empty()) {
    const std::size_t comma = list.find(", ");
    if (list.substr(0, comma) == method) return true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 2);
  }
  return false;
}

// Whether `path` matches a route path: literal, or ending in "([^/]+)" (one non-empty segment,
// stored in `segment`). (Matched by hand: no std::regex per request, and GCC 12's std::regex
// trips -Wmaybe-uninitialized under the sanitizers.)
bool path_matches(const std::string& path, const std::string& pattern, std::string* segment) {
  constexpr std::string_view kSegment = "([^/]+)";
  if (!pattern.ends_with(kSegment)) return path == pattern;
  std::string_view prefix(pattern.data(), pattern.size() - kSegment.size());
  if (!path.starts_with(prefix) || path.size() == prefix.size()) return false;
  if (path.find('/', prefix.size()) != std::string::npos) return false;
  if (segment) *segment = path.substr(prefix.size());
  return true;
}

// The route a path belongs to, or null; `pattern` gets its /v1 path (for 404/405 and the metrics
// label), `segment` what its "([^/]+)" matched.
const Route* find_route(const std::string& path, std::string* pattern = nullptr,
                        std::string* segment = nullptr) {
  for (const Route& route : route_table()) {
    for (const std::string& p : route.paths) {
      if (path_matches(path, p, segment)) {
        if (pattern) *pattern = route.paths.front();
        return &route;
      }
    }
  }
  return nullptr;
}

// Constant-time comparison, so that response timing does not reveal how much of a key matched.
bool same_key(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

std::string ascii_lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Every answer carries the CORS origin, errors (401, 404, 413 …) included: a browser hides a
// response without it from the page, which then cannot show why the request failed.
void allow_origin(const ServerOptions& options, HttpResponse& res) {
  if (options.cors_origin.empty() || res.has_header("Access-Control-Allow-Origin")) return;
  res.set_header("Access-Control-Allow-Origin", options.cors_origin);
  res.set_header("Vary", "Origin");
}

// RFC 7230 §3.3's rules for a request's body framing, beyond what the transport's parser
// refuses (a Content-Length that is not a length or conflicts with another, both headers at
// once): nullopt when they are sound. A transfer coding other than chunked is not implemented
// (501).
std::optional<ApiError> framing_error(const HttpRequest& req) {
  const std::size_t lengths = req.headers.count("Content-Length");
  if (!req.has_header("Transfer-Encoding")) return std::nullopt;
  std::string codings = req.header("Transfer-Encoding");
  for (std::size_t i = 1; i < req.headers.count("Transfer-Encoding"); ++i) {
    codings += ", " + req.headers.value("Transfer-Encoding", i);
  }
  const std::string lower = ascii_lower(codings);
  const std::size_t begin = lower.find_first_not_of(" \t");
  const std::size_t end = lower.find_last_not_of(" \t");
  if (begin == std::string::npos || lower.substr(begin, end - begin + 1) != "chunked") {
    return unsupported_transfer_encoding(codings);
  }
  if (lengths > 0) return bad_framing("both Content-Length and Transfer-Encoding are given");
  return std::nullopt;
}

// The token of an "Authorization: Bearer <token>" header: the scheme is case-insensitive
// (RFC 7235), so "bearer" and "BEARER" are the same; spaces around the token do not count.
std::string bearer_token(const std::string& header) {
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ' ||
      ascii_lower(header.substr(0, kScheme.size())) != kScheme) {
    return {};
  }
  std::size_t begin = header.find_first_not_of(' ', kScheme.size());
  std::size_t end = header.find_last_not_of(' ');
  if (begin == std::string::npos) return {};
  return header.substr(begin, end - begin + 1);
}

std::string served_name(const std::string& model_path) {
  std::filesystem::path path(model_path);
  std::string name = path.filename().string();
  if (name.empty()) name = path.parent_path().filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  name = ascii_lower(std::move(name));
  return name.empty() ? "model" : name;
}

std::vector<std::string> names_for(const ServerOptions& options, const std::string& model_path) {
  if (!options.served_model_names.empty()) return options.served_model_names;
  return {served_name(model_path)};
}

void run_handler(ServerContext& context, Handler handler, const HttpRequest& req,
                 HttpResponse& res) {
  try {
    handler(context, req, res);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    // send_error logs the cause with the request id; the client sees only the id.
    send_error(res, internal_error(fmt::format("{} {}: {}", req.method, req.path, e.what())));
  }
}

std::string fingerprint_of(const std::string& source) {
  return fmt::format("fp_{:010x}", std::hash<std::string>{}(source)&0xFFFFFFFFFFULL);
}

// What every answer carries: the request's id (the client's, or a fresh one) and the CORS origin.
void stamp(const ServerOptions& options, const HttpRequest& req, HttpResponse& res) {
  const std::string request_id = req.header("X-Request-Id");
  res.set_header("X-Request-Id", request_id.empty() ? random_id("req-") : request_id);
  allow_origin(options, res);
}

TransportOptions transport_options(const ServerOptions& o) {
  TransportOptions t;
  t.host = o.host;
  t.port = o.port;
  t.read_timeout_seconds = o.read_timeout_seconds;
  t.write_timeout_seconds = o.write_timeout_seconds;
  t.idle_timeout_seconds = o.read_timeout_seconds;
  t.max_body_bytes = o.max_body_bytes;
  t.worker_threads = o.http_threads;
  return t;
}

}  // namespace

OpenAiServer::OpenAiServer(ServerOptions options, BuildInfo build, const std::string& model_path,
                           const std::string& executor)
    : context_(std::make_unique<ServerContext>(options, std::move(build),
                                               names_for(options, model_path), executor)),
      transport_(std::make_unique<HttpTransport>(transport_options(context_->options),
                                                 static_cast<HttpApplication&>(*this))) {}

OpenAiServer::~OpenAiServer() {
  // Connections the transport still holds own request runs, which cancel through the scheduler
  // when destroyed: they must go first.
  transport_->stop();
  transport_.reset();
  context_->scheduler.reset();
}

ServerState OpenAiServer::state() const {
  return context_->state.load();
}

int OpenAiServer::start() {
  return transport_->start();
}

bool OpenAiServer::admit(HttpRequest& req, HttpResponse& res) {
  const ServerContext& ctx = *context_;
  RequestLog& log = *req.log;
  stamp(ctx.options, req, res);
  const Route* route = find_route(req.path, &log.route, &req.path_parameter);
  auto reject = [&](const ApiError& error) {
    send_error(res, error);
    return false;
  };
  // HTTP/1.0 has no persistent connections: say so (§0).
  if (req.version == "HTTP/1.0") res.set_header("Connection", "close");
  if (route == nullptr) {
    log.route = "other";
    return reject(unknown_url(req.method, req.path));
  }
  if (req.method == "OPTIONS") {
    res.status = 204;
    res.set_header("Allow", std::string(route->method) + ", OPTIONS");
    if (!ctx.options.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Methods", std::string(route->method) + ", OPTIONS");
      // Whatever headers the page's client sends (the OpenAI SDKs add x-stainless-*) are
      // allowed: the API key, not the header list, is what protects the server.
      const std::string asked = req.header("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers",
                     asked.empty() ? "Authorization, Content-Type, X-Request-Id" : asked);
      res.set_header("Access-Control-Max-Age", "600");
    }
    return false;
  }
  if (!allows(*route, req.method)) {
    res.set_header("Allow", route->method);
    return reject(method_not_allowed(req.method, req.path));
  }
  if (route->authenticated && !ctx.options.api_key.empty() &&
      !same_key(bearer_token(req.header("Authorization")), ctx.options.api_key)) {
    return reject(invalid_api_key());
  }
  if (std::optional<ApiError> framing = framing_error(req)) {
    // The body cannot be delimited, so the connection cannot carry another request.
    res.set_header("Connection", "close");
    return reject(*framing);
  }
  // framing_error leaves Transfer-Encoding absent or exactly chunked.
  if (req.method == "POST" && !req.has_header("Content-Length") &&
      !req.has_header("Transfer-Encoding")) {
    return reject(length_required());
  }
  // An announced body over the limit is refused before a byte of it is read (§9). (The parser
  // has checked that Content-Length is digits.)
  if (req.has_header("Content-Length") && std::strtoull(req.header("Content-Length").c_str(),
                                                        nullptr, 10) > ctx.options.max_body_bytes) {
    return reject(request_too_large(ctx.options.max_body_bytes));
  }
  return true;
}

bool OpenAiServer::answers_inline(const HttpRequest& req) const {
  const Route* route = find_route(req.path);
  return route != nullptr && route->inline_probe;
}

void OpenAiServer::handle(HttpRequest& req, HttpResponse& res) {
  run_handler(*context_, find_route(req.path)->handler, req, res);
}

void OpenAiServer::refuse(HttpRequest& req, TransportFault fault, const std::string& detail,
                          HttpResponse& res) {
  stamp(context_->options, req, res);
  if (req.log->route.empty() && find_route(req.path, &req.log->route) == nullptr) {
    req.log->route = "other";
  }
  auto unreadable = [](int status, const std::string& why) {
    return ApiError(status, "invalid_request_error", "bad_request", std::nullopt,
                    fmt::format("The request could not be read (HTTP {}): {}.", status, why));
  };
  switch (fault) {
    case TransportFault::kUnreadable:
      return send_error(res, unreadable(400, detail));
    case TransportFault::kHeadTooLarge:
      return send_error(res, unreadable(431, detail));
    case TransportFault::kBodyTooLarge:
      return send_error(res, request_too_large(context_->options.max_body_bytes));
    case TransportFault::kBadFraming:
      return send_error(res, bad_framing(detail));
    case TransportFault::kTimeout:
      return send_error(res, unreadable(408, detail));
  }
}

void OpenAiServer::completed(const HttpRequest& req, const HttpResponse& res) {
  const RequestLog& log = *req.log;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - log.start)
          .count();
  context_->metrics.http_response(log.route.empty() ? "other" : log.route, res.status);
  log::info(
      "access method={} path={} status={} prompt_tokens={} completion_tokens={} "
      "latency_ms={:.1f} request_id={}",
      req.method.empty() ? "-" : req.method, req.path.empty() ? "-" : req.path, res.status,
      log.prompt_tokens, log.completion_tokens, ms, res.header("X-Request-Id"));
}

void OpenAiServer::serve_model(const ServedModel& model) {
  ServerContext& ctx = *context_;
  ctx.model = model;
  ctx.limits.vocab_size = model.model->vocab_size();
  ctx.limits.max_choices = ctx.options.max_choices;
  ctx.limits.model_names = ctx.names;
  ctx.limits.max_messages = ctx.options.max_messages;
  std::string source = model.chat_template ? model.chat_template->source() : "";
  ctx.channel_format = channel_format_of_template(source);
  // The efforts a template takes: Muse's maps five to a reasoning strength (§9 of its spec);
  // Qwen3.8's raises on values other than its three.
  if (ctx.channel_format == ChannelFormat::kMuseHeaders) {
    ctx.limits.reasoning_effort_values =
        std::vector<std::string>{"minimal", "low", "medium", "high", "xhigh"};
  } else if (ctx.channel_format == ChannelFormat::kKimiXtml) {
    // Kimi K3's thinking efforts; "none" turns thinking off (text/kimi_xtml_chat.h).
    ctx.limits.reasoning_effort_values = std::vector<std::string>{"none", "low", "high", "max"};
  } else if (source.find("reasoning_effort") != std::string::npos) {
    ctx.limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  }
  ctx.tool_format = ctx.options.tool_call_format == "json"  ? ToolCallFormat::kJson
                    : ctx.options.tool_call_format == "xml" ? ToolCallFormat::kXml
                                                            : tool_call_format_for_template(source);
  // Kimi K3's splitter hands its calls on as <tool_call> blocks of the XML form.
  if (ctx.channel_format == ChannelFormat::kKimiXtml) ctx.tool_format = ToolCallFormat::kXml;
  std::string speculation =
      model.drafter == nullptr
          ? "none"
          : fmt::format("{}:{}:{}:{}", model.speculative_method, model.drafter_source,
                        model.block_size, model.confidence_threshold);
  ctx.fingerprint = fingerprint_of(ctx.build.revision + "|" + model.fingerprint_source + "|" +
                                   model.executor + "|spec:" + speculation);
  ctx.constraints =
      std::make_unique<engine::ConstraintCache>(*model.tokenizer, model.model->stop_token_ids());
  ctx.tokenizer_ready.store(true);

  engine::SchedulerOptions scheduler;
  scheduler.rows = ctx.options.max_batch;
  scheduler.context = model.context;
  scheduler.max_queue = ctx.options.max_queue;
  scheduler.prefill_chunk = ctx.options.prefill_chunk;
  scheduler.prefill_budget_ms = ctx.options.prefill_budget_ms;
  scheduler.state_memory_budget = ctx.options.kv_memory_bytes;
  scheduler.prefix_cache_memory = ctx.options.prefix_cache ? ctx.options.prefix_cache_bytes : 0;
  scheduler.prefix_cache_interval = ctx.options.prefix_cache_interval;
  scheduler.test_hooks = ctx.options.test_hooks.scheduler;
  if (const std::string& script = ctx.options.test_hooks.scripted_output; !script.empty()) {
    scheduler.test_hooks.scripted_tokens = model.tokenizer->encode(script, /*parse_special=*/true);
  }
  if (model.drafter != nullptr) {
    scheduler.drafter = model.drafter;
    scheduler.block_size = model.block_size;
    scheduler.confidence_threshold = model.confidence_threshold;
    scheduler.spec_max_rows = ctx.options.spec_max_rows;
    ServerMetrics& metrics = ctx.metrics;
    scheduler.on_round = [&metrics](int64_t drafted, int64_t accepted) {
      metrics.spec_step(static_cast<int>(drafted), static_cast<int>(accepted));
    };
  }
  ctx.scheduler =
      std::make_unique<engine::BatchScheduler>(*model.model, *model.tokenizer, scheduler);
  ctx.metrics.set_draft_positions(static_cast<int>(ctx.scheduler->draft_positions()));
  warm_up();
  ctx.state.store(ServerState::kReady);
  ctx.metrics.set_ready(true);
}

// One real step through the scheduler before /health says ready: the first step pays for page
// faults in the weights and the step program's construction.
void OpenAiServer::warm_up() {
  auto stream = std::make_shared<engine::RequestStream>("warm-up");
  engine::ChoiceWork work;
  work.request.prompt = {0};
  work.request.max_tokens = 1;
  work.request.ignore_eos = true;
  work.request.sampling.temperature = 0;
  if (context_->scheduler->submit(stream, {work}) != engine::BatchScheduler::Admission::kAccepted) {
    fail("the engine did not accept its warm-up request");
  }
  for (;;) {
    for (engine::StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
      if (e.kind == engine::StreamEvent::Kind::kError) fail("warm-up step failed: {}", e.error);
      if (e.kind == engine::StreamEvent::Kind::kToken && e.outcome.finished) return;
    }
  }
}

void OpenAiServer::mark_failed() {
  context_->state.store(ServerState::kFailed);
  context_->metrics.set_ready(false);
}

bool OpenAiServer::wait_for(const std::function<bool()>& done,
                            std::chrono::steady_clock::time_point until,
                            const std::function<bool()>& hurry) {
  while (!done() && std::chrono::steady_clock::now() < until) {
    if (hurry()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !hurry();
}

void OpenAiServer::shutdown(const std::function<bool()>& hurry) {
  using Clock = std::chrono::steady_clock;
  ServerContext& ctx = *context_;
  ctx.state.store(ServerState::kDraining);
  ctx.metrics.set_ready(false);
  engine::BatchScheduler* scheduler = ctx.scheduler.get();
  auto idle = [scheduler] { return scheduler == nullptr || scheduler->idle(); };
  if (scheduler != nullptr) scheduler->close();
  const auto grace =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(ctx.options.shutdown_grace_seconds));
  bool hurried = !wait_for(idle, grace, hurry);
  if (!idle()) {
    log::warn("shutdown: {}, cancelling what still runs",
              hurried ? "second signal" : "grace period over");
    scheduler->abort_all(kShutdownMessage);
    hurried =
        !wait_for(idle, Clock::now() + std::chrono::seconds(hurried ? 1 : 5), hurry) || hurried;
  }
  // Let the connections write what the engine gave them (in-band errors, 503s).
  auto answered = [this] { return transport_->busy_connections() == 0; };
  (void)wait_for(answered, Clock::now() + std::chrono::milliseconds(hurried ? 300 : 2000),
                 [] { return false; });
  transport_->stop();
}

}  // namespace md::server
