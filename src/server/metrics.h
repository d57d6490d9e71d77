// The server's metrics registry (docs/openai-api.md §1.5): every family exists from construction,
// recording is thread-safe and cheap enough for the engine's per-token loop, and render() writes
// the Prometheus text exposition format 0.0.4 served by GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/prefix_cache.h"
#include "server/histogram.h"
#include "text/grammar/token_constraint.h"

namespace md::server {

struct MetricsConfig {
  std::string model_name;  // the served id; the `model_name` label of every series
  std::string version;     // build_info labels
  std::string revision;
  std::string executor;
  int64_t num_rows = 0;  // row capacity (maximum batch)
  // Draft length k; 0 when speculation is off. The per-position family exports positions
  // 0..k-1 only, so with k = 0 it has its # HELP / # TYPE lines and no series, and the
  // acceptance-length histogram has the single bound 1 (plus +Inf).
  int draft_positions = 0;
};

class ServerMetrics {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  explicit ServerMetrics(MetricsConfig config);

  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // All recording methods are thread-safe. Negative counts are treated as 0 (counters never go
  // down). A label value outside the documented set still counts, as a new series.

  // A generation request passed validation; endpoint is "chat", "completions" or "responses".
  void request_received(std::string_view endpoint);
  // A choice finished; reason is stop | length | tool_calls | abort | error.
  void choice_finished(std::string_view reason);
  // Every HTTP response; route is the route pattern ("/v1/chat/completions"), "other" if unknown.
  void http_response(std::string_view route, int status);

  // `n` prompt tokens prefilled, of which `cached` came from a prefix cache.
  void prompt_tokens(int64_t n, int64_t cached = 0);
  void generation_tokens(int64_t n);

  void set_running(int64_t rows);
  void set_waiting(int64_t requests);
  void set_kv_cache_usage(double ratio);
  // The longest wait between two decode steps with rows decoding, since start (scheduler).
  void set_decode_gap_max(double seconds);
  // Sequence memory reserved by running requests, and the budget (--kv-memory; 0: none).
  void set_state_memory(std::size_t reserved, std::size_t budget);
  // The KV block pool now: blocks and bytes held by sequences, and the most bytes ever held.
  void set_kv_pool(std::size_t blocks, std::size_t bytes, std::size_t peak_bytes);
  // The prefix cache's counts and memory now (engine/prefix_cache.h); all 0 without one.
  void set_prefix_cache(const engine::PrefixCacheStats& stats);
  // Structured output's mask work since start (every grammar compiled).
  void set_grammar(const grammar::MaskStats& stats);

  // Latencies in seconds, from a monotonic clock.
  void observe_ttft(double s);
  // `k` tokens of one choice arrived `dt` after its previous emission: k observations of dt/k.
  void observe_inter_token(double dt, int64_t k);
  void observe_e2e(double s);
  void observe_queue(double s);
  void observe_prefill(double s);
  void observe_decode(double s);
  void observe_request_prompt_tokens(int64_t n);
  void observe_request_generation_tokens(int64_t n);

  // One verify step that carried `drafted` draft tokens of which the leading `accepted` were
  // accepted (bonus token excluded): per-position counters 0..accepted-1 increase and the step
  // committed accepted + 1 tokens. A step with no drafts is not a verify step and records
  // nothing. Arguments are clamped to 0 <= accepted <= drafted <= k so that the §1.5
  // consistency rules hold whatever the caller passes.
  void spec_step(int drafted, int accepted);
  // Speculation found on at model load (the drafter's length is known only then): resizes the
  // per-position family and the acceptance-length histogram to k positions and zeroes them.
  void set_draft_positions(int k);
  void decode_step();

  void set_ready(bool ready);

  // The full exposition text, ending in a newline.
  std::string render() const;

 private:
  class Writer;

  // Counts by one label value in first-seen order; the documented values are seeded so that they
  // read 0 from startup. Guarded by labels_mu_.
  class LabelCounts {
   public:
    explicit LabelCounts(std::vector<std::string> seeds);
    void add(std::string_view value);
    const std::vector<std::pair<std::string, uint64_t>>& entries() const { return entries_; }

   private:
    std::vector<std::pair<std::string, uint64_t>> entries_;
  };

  // The speculation counters, copied under one lock so that a render never shows
  // accepted != sum(per position) or a per-position counter above its predecessor.
  struct SpecSnapshot {
    uint64_t drafts = 0;
    uint64_t draft_tokens = 0;
    uint64_t accepted = 0;
    std::vector<uint64_t> accepted_per_pos;
    Histogram::Snapshot acceptance_length;
  };
  SpecSnapshot spec_snapshot() const;

  void render_requests(Writer& w) const;
  void render_tokens(Writer& w) const;
  void render_gauges(Writer& w) const;
  void render_prefix_cache(Writer& w) const;
  void render_grammar(Writer& w) const;
  void render_latencies(Writer& w) const;
  void render_spec(Writer& w) const;
  void render_status(Writer& w) const;

  const MetricsConfig config_;

  mutable std::mutex labels_mu_;  // per request / per response, never per token
  LabelCounts endpoints_;
  LabelCounts finished_reasons_;
  // route -> status -> count; transparent comparison so lookups take a string_view.
  std::map<std::string, std::map<int, uint64_t>, std::less<>> http_responses_;

  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> prompt_tokens_cached_{0};
  std::atomic<uint64_t> generation_tokens_{0};
  std::atomic<uint64_t> decode_steps_{0};
  std::atomic<int64_t> running_{0};
  std::atomic<int64_t> waiting_{0};
  std::atomic<double> kv_cache_usage_{0.0};
  std::atomic<double> decode_gap_max_{0.0};
  std::atomic<std::size_t> state_memory_reserved_{0};
  std::atomic<std::size_t> state_memory_budget_{0};
  std::atomic<std::size_t> kv_pool_blocks_{0};
  std::atomic<std::size_t> kv_pool_bytes_{0};
  std::atomic<std::size_t> kv_pool_peak_bytes_{0};
  mutable std::mutex prefix_cache_mu_;
  engine::PrefixCacheStats prefix_cache_;
  grammar::MaskStats grammar_;
  std::atomic<bool> ready_{false};

  Histogram ttft_;
  Histogram inter_token_;
  Histogram e2e_;
  Histogram queue_;
  Histogram prefill_;
  Histogram decode_;
  Histogram request_prompt_tokens_;
  Histogram request_generation_tokens_;

  // Once per engine step, so a mutex costs nothing that matters and buys consistent snapshots.
  mutable std::mutex spec_mu_;
  uint64_t spec_drafts_ = 0;
  uint64_t spec_draft_tokens_ = 0;
  std::vector<uint64_t> spec_accepted_per_pos_;  // size k
  std::unique_ptr<Histogram> spec_acceptance_length_;
};

}  // namespace md::server
