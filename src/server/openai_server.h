// `megadecode serve`: the OpenAI-compatible HTTP server (contract: docs/openai-api.md).
// It listens before the model is loaded (GET /health answers 503 model_loading meanwhile), then
// serves the model through the continuous-batching scheduler. It is the HTTP transport's
// application (server/http_transport.h): it screens each request head (route, method, key,
// framing, size), answers probes on the event loop, runs the other routes on the transport's
// workers, and logs each response. Generation happens on the scheduler's step thread; a
// generation's response is a deferred body pumped as tokens come, so no thread waits on it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch_scheduler.h"
#include "server/http_transport.h"
#include "server/server_context.h"

namespace md::server {

class OpenAiServer : private HttpApplication {
 public:
  // `model_path` names the model when no --served-model-name is given (its last component,
  // lower-cased); `executor` is reported in build info and the fingerprint.
  OpenAiServer(ServerOptions options, BuildInfo build, const std::string& model_path,
               const std::string& executor);
  ~OpenAiServer() override;

  // Binds the listening socket (md::Error when it cannot) and starts answering. Returns the
  // bound port (useful with port 0).
  int start();
  // The model is loaded: tokenizer routes answer from now on; the scheduler is created and a
  // warm-up step runs; then /health turns 200. `model_path` names the model when no
  // --served-model-name was given.
  void serve_model(const ServedModel& model);
  void mark_failed();

  // Graceful shutdown: stop admitting, let running choices finish until the grace period ends,
  // then cancel the rest (in-band error for streams, 503 for the others), let those answers go
  // out, then close every connection. `hurry` is polled meanwhile: when it turns true (a second
  // signal), what runs is cancelled at once and shutdown returns within a second.
  void shutdown(const std::function<bool()>& hurry = [] { return false; });
  ServerState state() const;

  ServerContext& context() { return *context_; }

 private:
  bool admit(HttpRequest& req, HttpResponse& res) override;
  bool answers_inline(const HttpRequest& req) const override;
  void handle(HttpRequest& req, HttpResponse& res) override;
  void refuse(HttpRequest& req, TransportFault fault, const std::string& detail,
              HttpResponse& res) override;
  void completed(const HttpRequest& req, const HttpResponse& res) override;
  void warm_up();
  // Waits until `done` or `until`, polling `hurry`; false when hurried.
  bool wait_for(const std::function<bool()>& done, std::chrono::steady_clock::time_point until,
                const std::function<bool()>& hurry);

  std::unique_ptr<ServerContext> context_;
  std::unique_ptr<HttpTransport> transport_;
};

}  // namespace md::server
