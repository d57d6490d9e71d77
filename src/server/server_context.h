// What every route handler shares: options, the served model, the scheduler, metrics, the
// server's state and the request limits; plus the small helpers that write JSON responses.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/batch_scheduler.h"
#include "engine/constraint_cache.h"
#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/metrics.h"
#include "server/response_store.h"
#include "server/served_model.h"
#include "server/server_options.h"
#include "text/channel_splitter.h"
#include "text/tool_call_parser.h"

namespace md::server {

enum class ServerState { kLoading, kReady, kDraining, kFailed };

struct BuildInfo {
  std::string version = "0.1.0";
  std::string revision = "unknown";
};

struct ServerContext {
  ServerContext(ServerOptions opts, BuildInfo info, std::vector<std::string> served_names,
                const std::string& executor);

  ServerOptions options;
  BuildInfo build;
  std::vector<std::string> names;  // served id first, then aliases
  int64_t created = 0;             // server start, Unix seconds (the model's "created")
  ServerMetrics metrics;
  std::atomic<ServerState> state{ServerState::kLoading};
  std::atomic<bool> tokenizer_ready{false};

  // Set once by serve_model (before tokenizer_ready turns true; read-only afterwards).
  ServedModel model;
  RequestLimits limits;
  std::string fingerprint;
  ToolCallFormat tool_format = ToolCallFormat::kJson;
  // How the chat template marks reasoning (<think> tags, Muse's message headers, or not at all).
  ChannelFormat channel_format = ChannelFormat::kNone;
  std::unique_ptr<engine::BatchScheduler> scheduler;
  // Structured output's compiled grammars, shared by requests with the same grammar.
  std::unique_ptr<engine::ConstraintCache> constraints;
  // The Responses API's stored responses (--responses-kept of them).
  ResponseStore responses;

  int64_t max_prompt_tokens() const { return model.context - 1; }
  // Throws the 503 of §1.1 unless generation requests can be served now.
  void require_ready() const;
  void require_tokenizer() const;
};

// Compact JSON, UTF-8 raw; f32 values should go through json_float first.
std::string dump_json(const nlohmann::ordered_json& value);
// An f32 value as the double whose shortest decimal is the float's shortest decimal (%.9g-level
// round trip without f32 noise digits such as 0.10000000149011612).
double json_float(float value);
void send_json(HttpResponse& res, const nlohmann::ordered_json& body, int status = 200);
void send_error(HttpResponse& res, const ApiError& error);
// A fresh id: prefix + 24 characters from [A-Za-z0-9].
std::string random_id(const std::string& prefix);

// Now, as Unix seconds.
int64_t unix_seconds_now();

}  // namespace md::server
