// Everything `megadecode serve` is configured with (flags of the same names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/server_testing.h"

namespace md::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> served_model_names;  // first is the id; empty: from the model path
  std::string api_key;                          // empty: no authentication
  int max_batch = 8;                            // engine rows
  int64_t max_queue = 256;                      // waiting requests before 429
  int64_t max_choices = 64;                     // n × prompts per request
  std::size_t max_body_bytes = 16u << 20;
  std::size_t max_messages = 4096;
  // Responses API: stored responses for previous_response_id, by count and by bytes.
  std::size_t responses_kept = 100;
  std::size_t responses_memory_bytes = std::size_t{256} << 20;
  std::optional<int64_t> default_max_tokens;
  // Small, so that the budget can bound the stall on slow models, at a small cost in prefill
  // speed (docs/DECISIONS.md: the default model, one thread, 114 tok/s in chunks of 256, 108 in
  // 8, 97 in 4).
  int64_t prefill_chunk = 8;
  double prefill_budget_ms = 50;
  // Sequence-state memory (KV caches, recurrent states) running requests may reserve at once
  // (engine SchedulerOptions::state_memory_budget); 0: no limit. serve's default: half of the
  // machine's memory.
  std::size_t kv_memory_bytes = 0;
  // States kept after requests for later prompts that share a prefix (engine/prefix_cache.h),
  // within this many bytes (0 or prefix_cache off: none).
  bool prefix_cache = true;
  std::size_t prefix_cache_bytes = std::size_t{1} << 30;
  // Tokens between the states a prompt leaves in the cache (on models that cannot rewind one).
  int64_t prefix_cache_interval = 256;
  // With a drafter: greedy rows speculate while at most this many rows generate (engine
  // SchedulerOptions::spec_max_rows); sampled rows always do.
  int64_t spec_max_rows = 1;
  double shutdown_grace_seconds = 30;
  int read_timeout_seconds = 60;
  int write_timeout_seconds = 60;
  int http_threads = 4;  // run route handlers (connections and streams hold none)
  std::string cors_origin;
  std::string tool_call_format;  // "", "json" or "xml"
  bool reasoning_parser = true;
  testing::ServerHooks test_hooks;  // test seam (server_testing.h): off by default
};

// Whether `host` only takes connections from this machine: "localhost", 127.0.0.0/8 or ::1.
// Anything else (0.0.0.0, ::, a LAN address) is reachable from the network.
bool is_loopback_host(const std::string& host);

}  // namespace md::server
