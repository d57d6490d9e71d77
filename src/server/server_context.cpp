#include "server/server_context.h"

#include <fmt/format.h>

#include <chrono>
#include <random>
#include <string>

namespace md::server {

ServerContext::ServerContext(ServerOptions opts, BuildInfo info,
                             std::vector<std::string> served_names, const std::string& executor)
    : options(std::move(opts)),
      build(std::move(info)),
      names(std::move(served_names)),
      created(unix_seconds_now()),
      metrics(MetricsConfig{.model_name = names.front(),
                            .version = build.version,
                            .revision = build.revision,
                            .executor = executor,
                            .num_rows = options.max_batch,
                            .draft_positions = 0}),
      responses(options.responses_kept, options.responses_memory_bytes) {}

void ServerContext::require_ready() const {
  switch (state.load()) {
    case ServerState::kReady:
      return;
    case ServerState::kLoading:
      throw unavailable(Unavailable::kModelLoading);
    case ServerState::kDraining:
      throw unavailable(Unavailable::kShuttingDown);
    case ServerState::kFailed:
      throw unavailable(Unavailable::kEngineFailed);
  }
}

void ServerContext::require_tokenizer() const {
  if (!tokenizer_ready.load()) throw unavailable(Unavailable::kModelLoading);
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

double json_float(float value) {
  if (!std::isfinite(value)) return value > 0 ? 3.4028234663852886e38 : -3.4028234663852886e38;
  return std::stod(fmt::format("{}", value));
}

void send_json(HttpResponse& res, const nlohmann::ordered_json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(HttpResponse& res, const ApiError& error) {
  if (error.retry_after_seconds) {
    res.set_header("Retry-After", std::to_string(*error.retry_after_seconds));
  }
  send_json(res, with_request_id(error, res.header("X-Request-Id")).body(), error.status);
}

int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id(const std::string& prefix) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::uniform_int_distribution<int> pick(0, 61);
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(generator)];
  return id;
}

}  // namespace md::server
