#include "server/openai_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "server/client_watch.h"
#include "server/listen_backlog.h"
#include "server/routes.h"

namespace md::server {
namespace {

using Handler = void (*)(ServerContext&, const httplib::Request&, httplib::Response&);

struct Route {
  std::vector<std::string> paths;  // the /v1 path first, then its aliases
  const char* method;
  Handler handler;
  bool authenticated;
};

// Every route of §1; each /v1/X also answers at /X.
const std::vector<Route>& route_table() {
  static const std::vector<Route> routes = {
      {{"/health", "/v1/health", "/ping"}, "GET", &handle_health, false},
      {{"/metrics"}, "GET", &handle_metrics, false},
      {{"/v1/models", "/models"}, "GET", &handle_models, true},
      {{"/v1/models/([^/]+)", "/models/([^/]+)"}, "GET", &handle_model, true},
      {{"/tokenize"}, "POST", &handle_tokenize, true},
      {{"/detokenize"}, "POST", &handle_detokenize, true},
      {{"/v1/completions", "/completions"}, "POST", &handle_completions, true},
      {{"/v1/chat/completions", "/chat/completions"}, "POST", &handle_chat, true},
      {{"/version"}, "GET", &handle_version, true},
      {{"/props"}, "GET", &handle_props, true},
      {{"/slots"}, "GET", &handle_slots, true},
  };
  return routes;
}

// Whether `path` matches a route path: literal, or ending in "([^/]+)" (one non-empty segment).
// (Matched by hand: no std::regex per request, and GCC 12's std::regex trips -Wmaybe-uninitialized
// under the sanitizers.)
bool path_matches(const std::string& path, const std::string& pattern) {
  constexpr std::string_view kSegment = "([^/]+)";
  if (!pattern.ends_with(kSegment)) return path == pattern;
  std::string_view prefix(pattern.data(), pattern.size() - kSegment.size());
  if (!path.starts_with(prefix) || path.size() == prefix.size()) return false;
  return path.find('/', prefix.size()) == std::string::npos;
}

// The route pattern a path belongs to (for 404/405 and the metrics label), or null.
const Route* find_route(const std::string& path, std::string* pattern = nullptr) {
  for (const Route& route : route_table()) {
    for (const std::string& p : route.paths) {
      if (path_matches(path, p)) {
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
void allow_origin(const ServerOptions& options, httplib::Response& res) {
  if (options.cors_origin.empty() || res.has_header("Access-Control-Allow-Origin")) return;
  res.set_header("Access-Control-Allow-Origin", options.cors_origin);
  res.set_header("Vary", "Origin");
}

// RFC 7230 §3.3's rules for a request's body framing, as far as headers show them: nullopt when
// they are sound. Content-Length is digits only, and when repeated every copy agrees; a
// transfer coding other than chunked is not implemented (501); both headers at once can smuggle
// a request past a proxy and are refused.
std::optional<ApiError> framing_error(const httplib::Request& req) {
  const std::size_t lengths = req.get_header_value_count("Content-Length");
  for (std::size_t i = 0; i < lengths; ++i) {
    const std::string value = req.get_header_value("Content-Length", i);
    if (value.empty() || value.size() > 19 ||
        value.find_first_not_of("0123456789") != std::string::npos) {
      return bad_framing(fmt::format("Content-Length '{}' is not a length", value));
    }
    if (value != req.get_header_value("Content-Length", 0)) {
      return bad_framing("conflicting Content-Length headers");
    }
  }
  if (!req.has_header("Transfer-Encoding")) return std::nullopt;
  std::string codings = req.get_header_value("Transfer-Encoding");
  for (std::size_t i = 1; i < req.get_header_value_count("Transfer-Encoding"); ++i) {
    codings += ", " + req.get_header_value("Transfer-Encoding", i);
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

void run_handler(ServerContext& context, Handler handler, const httplib::Request& req,
                 httplib::Response& res) {
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

}  // namespace

OpenAiServer::OpenAiServer(ServerOptions options, BuildInfo build, const std::string& model_path,
                           const std::string& executor)
    : context_(std::make_unique<ServerContext>(options, std::move(build),
                                               names_for(options, model_path), executor)),
      http_(std::make_unique<httplib::Server>()) {
  install_routes();
}

OpenAiServer::~OpenAiServer() {
  if (http_->is_running()) http_->stop();
  if (listener_.joinable()) listener_.join();
  context_->scheduler.reset();
}

ServerState OpenAiServer::state() const {
  return context_->state.load();
}

void OpenAiServer::install_routes() {
  ServerContext& ctx = *context_;
  const ServerOptions& o = ctx.options;
  http_->new_task_queue = [threads = o.http_threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(o.max_body_bytes);
  http_->set_read_timeout(o.read_timeout_seconds, 0);
  http_->set_write_timeout(o.write_timeout_seconds, 0);
  http_->set_keep_alive_max_count(100000);
  http_->set_tcp_nodelay(true);

  http_->set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    RequestLog& log = current_request_log();
    log = RequestLog{};
    log.start = std::chrono::steady_clock::now();
    std::string request_id = req.get_header_value("X-Request-Id");
    res.set_header("X-Request-Id", request_id.empty() ? random_id("req-") : request_id);
    allow_origin(ctx.options, res);
    const Route* route = find_route(req.path, &log.route);
    const bool has_body = req.has_header("Content-Length")
                              ? req.get_header_value("Content-Length") != "0"
                              : req.has_header("Transfer-Encoding");
    auto reject = [&](const ApiError& error) {
      send_error(res, error);
      // The body of a rejected request is never read: the connection cannot carry another one.
      if (has_body) res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
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
        const std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers",
                       asked.empty() ? "Authorization, Content-Type, X-Request-Id" : asked);
        res.set_header("Access-Control-Max-Age", "600");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method != route->method) {
      res.set_header("Allow", route->method);
      return reject(method_not_allowed(req.method, req.path));
    }
    if (route->authenticated && !ctx.options.api_key.empty() &&
        !same_key(bearer_token(req.get_header_value("Authorization")), ctx.options.api_key)) {
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
    // An announced body over the limit is refused before a byte of it is read (§9).
    if (req.has_header("Content-Length")) {
      const std::string length = req.get_header_value("Content-Length");
      char* end = nullptr;
      unsigned long long announced = std::strtoull(length.c_str(), &end, 10);
      if (announced > ctx.options.max_body_bytes) {
        return reject(request_too_large(ctx.options.max_body_bytes));
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  for (const Route& route : route_table()) {
    for (const std::string& path : route.paths) {
      if (std::string(route.method) == "GET") {
        http_->Get(path,
                   [&ctx, h = route.handler](const httplib::Request& req, httplib::Response& res) {
                     run_handler(ctx, h, req, res);
                   });
        continue;
      }
      // POST bodies are read here rather than by cpp-httplib: it would parse form-encoded
      // bodies (with an 8 KiB limit of its own) whatever the route, and it applies no size limit
      // to chunked bodies. The body is JSON whatever the Content-Type (§0).
      http_->Post(path,
                  [&ctx, h = route.handler](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
                    httplib::Request with_body = req;
                    const std::size_t limit = ctx.options.max_body_bytes;
                    bool too_large = false;
                    bool read = reader([&](const char* data, std::size_t length) {
                      too_large = with_body.body.size() + length > limit;
                      if (too_large) return false;
                      with_body.body.append(data, length);
                      return true;
                    });
                    if (!read) {
                      // Either the limit stopped the read, or the body's framing broke it off
                      // (a bad chunk size, a body shorter than its Content-Length).
                      send_error(res, too_large ? request_too_large(limit)
                                                : bad_framing("malformed chunked encoding, or a "
                                                              "body shorter than its "
                                                              "Content-Length"));
                      res.set_header("Connection", "close");
                      return;
                    }
                    run_handler(ctx, h, with_body, res);
                  });
    }
  }

  // Statuses cpp-httplib sets itself (413 while reading a body, 400 for a malformed request)
  // get the API's error body.
  http_->set_error_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    // Requests cpp-httplib refuses before routing never met the pre-routing handler.
    if (!res.has_header("X-Request-Id")) res.set_header("X-Request-Id", random_id("req-"));
    allow_origin(ctx.options, res);
    if (!res.body.empty()) return;
    if (res.status == 413) {
      send_error(res, request_too_large(ctx.options.max_body_bytes));
      res.set_header("Connection", "close");
    } else if (res.status == 404) {
      send_error(res, unknown_url(req.method, req.path));
    } else {
      int status = res.status;
      send_error(res, ApiError(status, "invalid_request_error", "bad_request", std::nullopt,
                               fmt::format("The request could not be read (HTTP {}).", status)));
    }
  });

  http_->set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    RequestLog& log = current_request_log();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - log.start)
            .count();
    ctx.metrics.http_response(log.route.empty() ? "other" : log.route, res.status);
    // The response is out: a connection it declared closed must not read another request
    // (cpp-httplib 0.11 would keep it alive and parse an unread body as one).
    if (res.get_header_value("Connection") == "close") {
      ClientWatch(req.local_port, req.remote_addr, req.remote_port).stop_reading();
    }
    log::info(
        "access method={} path={} status={} prompt_tokens={} completion_tokens={} "
        "latency_ms={:.1f} request_id={}",
        req.method, req.path, res.status, log.prompt_tokens, log.completion_tokens, ms,
        res.get_header_value("X-Request-Id"));
  });
}

int OpenAiServer::start() {
  const ServerOptions& o = context_->options;
  int port = o.port;
  if (port == 0) {
    port = http_->bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on {}: no free port", o.host);
  } else if (!http_->bind_to_port(o.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, port);
  }
  const int backlog = system_listen_backlog();
  if (widen_listen_backlog(port, backlog) == 0) {
    log::warn("could not raise the listen backlog of port {}: bursts of connections may be lost",
              port);
  } else {
    log::debug("listen backlog {}", backlog);
  }
  listener_ = std::thread([this] {
    http_->listen_after_bind();
    listener_done_ = true;
  });
  return port;
}

void OpenAiServer::serve_model(const ServedModel& model) {
  ServerContext& ctx = *context_;
  ctx.model = model;
  ctx.limits.vocab_size = model.model->vocab_size();
  ctx.limits.max_choices = ctx.options.max_choices;
  ctx.limits.model_names = ctx.names;
  ctx.limits.max_messages = ctx.options.max_messages;
  std::string source = model.chat_template ? model.chat_template->source() : "";
  // Qwen3.8's template takes reasoning_effort and raises on values other than these.
  if (source.find("reasoning_effort") != std::string::npos) {
    ctx.limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  }
  ctx.reasoning_markers = source.find("<think>") != std::string::npos;
  ctx.tool_format = ctx.options.tool_call_format == "json"  ? ToolCallFormat::kJson
                    : ctx.options.tool_call_format == "xml" ? ToolCallFormat::kXml
                                                            : tool_call_format_for_template(source);
  std::string speculation = model.drafter == nullptr
                                ? "none"
                                : fmt::format("{}:{}:{}", model.speculative_method,
                                              model.drafter_source, model.block_size);
  ctx.fingerprint = fingerprint_of(ctx.build.revision + "|" + model.fingerprint_source + "|" +
                                   model.executor + "|spec:" + speculation);
  ctx.tokenizer_ready.store(true);

  engine::SchedulerOptions scheduler;
  scheduler.rows = ctx.options.max_batch;
  scheduler.context = model.context;
  scheduler.max_queue = ctx.options.max_queue;
  scheduler.prefill_chunk = ctx.options.prefill_chunk;
  scheduler.test_hooks = ctx.options.test_hooks.scheduler;
  if (model.drafter != nullptr) {
    scheduler.drafter = model.drafter;
    scheduler.block_size = model.block_size;
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

bool OpenAiServer::shutdown() {
  ServerContext& ctx = *context_;
  ctx.state.store(ServerState::kDraining);
  ctx.metrics.set_ready(false);
  if (ctx.scheduler) {
    ctx.scheduler->close();
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(ctx.options.shutdown_grace_seconds);
    while (!ctx.scheduler->idle() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ctx.scheduler->idle()) {
      log::warn("shutdown: grace period over, cancelling what still runs");
      ctx.scheduler->abort_all("The server is shutting down.");
      auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!ctx.scheduler->idle() && std::chrono::steady_clock::now() < hard) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  // Let handlers write what the engine gave them (in-band errors, 503s) before closing.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  http_->stop();
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!listener_done_ && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!listener_done_) {
    log::warn("shutdown: leaving connections that are still sending a request");
    return false;
  }
  if (listener_.joinable()) listener_.join();
  return true;
}

}  // namespace md::server
