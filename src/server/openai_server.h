// `megadecode serve`: the OpenAI-compatible HTTP server (contract: docs/openai-api.md).
// It listens before the model is loaded (GET /health answers 503 model_loading meanwhile), then
// serves the model through the continuous-batching scheduler. Handlers run on cpp-httplib's
// worker threads; generation happens on the scheduler's step thread, so the accept loop and the
// probes never wait for it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/batch_scheduler.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace md::server {

class OpenAiServer {
 public:
  // `model_path` names the model when no --served-model-name is given (its last component,
  // lower-cased); `executor` is reported in build info and the fingerprint.
  OpenAiServer(ServerOptions options, BuildInfo build, const std::string& model_path,
               const std::string& executor);
  ~OpenAiServer();

  // Binds the listening socket (md::Error when it cannot) and starts answering. Returns the
  // bound port (useful with port 0).
  int start();
  // The model is loaded: tokenizer routes answer from now on; the scheduler is created and a
  // warm-up step runs; then /health turns 200. `model_path` names the model when no
  // --served-model-name was given.
  void serve_model(const ServedModel& model);
  void mark_failed();

  // Graceful shutdown: stop admitting, let running choices finish until the grace period ends,
  // then cancel the rest (in-band error for streams, 503 for the others), then stop listening.
  // Returns false when connections still receiving a request (a client trickling its body holds
  // a connection thread until a read times out, forever if it keeps trickling) outlived the stop
  // by a second: nothing is owed to them, and the caller should exit without waiting (the
  // server object must then not be destroyed).
  [[nodiscard]] bool shutdown();

  ServerState state() const;

  ServerContext& context() { return *context_; }

 private:
  void install_routes();
  void warm_up();
  std::unique_ptr<ServerContext> context_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
};

}  // namespace md::server
