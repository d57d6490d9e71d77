#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

namespace md::server {
namespace {

// Bucket bounds exactly as listed in docs/openai-api.md §1.5.
std::vector<double> ttft_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1,     2.5,   5,    7.5,  10,   20,   40,   80,  160,  640};
}

std::vector<double> inter_token_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
          0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1,    2.5};
}

// Queue, prefill, decode and e2e.
std::vector<double> request_phase_bounds() {
  return {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920};
}

std::vector<double> token_count_bounds() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
}

// 1, 2, ..., k+1: a verify step commits the accepted drafts plus one sampled token.
std::vector<double> acceptance_length_bounds(int k) {
  std::vector<double> bounds;
  for (int n = 1; n <= k + 1; ++n) bounds.push_back(n);
  return bounds;
}

int draft_positions(const MetricsConfig& config) {
  return std::max(config.draft_positions, 0);
}

uint64_t non_negative(int64_t n) {
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

// Label values escape backslash, double quote and newline (text format 0.0.4).
std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// One extra label, formatted to follow model_name: `,key="value"`.
std::string label(std::string_view key, std::string_view value) {
  return fmt::format(",{}=\"{}\"", key, escape_label_value(value));
}

// Shortest round-trip decimal ("0.005", "1", "1e-05"), with Prometheus' spelling of non-finite
// values, which differs from fmt's "nan" / "inf".
std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

// Writes families and samples; every sample gets the model_name label first.
class ServerMetrics::Writer {
 public:
  explicit Writer(std::string_view model_name)
      : model_label_(fmt::format("model_name=\"{}\"", escape_label_value(model_name))) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }

  // `extra_labels` is zero or more `,key="value"` pairs from label().
  void sample(std::string_view name, std::string_view extra_labels, std::string_view value) {
    fmt::format_to(std::back_inserter(out_), "{}{{{}{}}} {}\n", name, model_label_, extra_labels,
                   value);
  }

  void counter(std::string_view name, std::string_view help, uint64_t value) {
    family(name, "counter", help);
    sample(name, "", fmt::format("{}", value));
  }

  // A counter whose value is not a whole number (seconds).
  void counter_value(std::string_view name, std::string_view help, std::string_view value) {
    family(name, "counter", help);
    sample(name, "", value);
  }

  void gauge(std::string_view name, std::string_view help, std::string_view value) {
    family(name, "gauge", help);
    sample(name, "", value);
  }

  void histogram(std::string_view name, std::string_view help, const Histogram::Snapshot& s) {
    family(name, "histogram", help);
    const std::string bucket = fmt::format("{}_bucket", name);
    for (std::size_t i = 0; i < s.bounds.size(); ++i) {
      sample(bucket, label("le", format_double(s.bounds[i])), fmt::format("{}", s.cumulative[i]));
    }
    sample(bucket, label("le", "+Inf"), fmt::format("{}", s.count));
    sample(fmt::format("{}_sum", name), "", format_double(s.sum));
    sample(fmt::format("{}_count", name), "", fmt::format("{}", s.count));
  }

  std::string take() && { return std::move(out_); }

 private:
  std::string model_label_;
  std::string out_;
};

ServerMetrics::LabelCounts::LabelCounts(std::vector<std::string> seeds) {
  for (auto& seed : seeds) entries_.emplace_back(std::move(seed), 0);
}

void ServerMetrics::LabelCounts::add(std::string_view value) {
  // A handful of values: a linear scan beats hashing and keeps the documented order.
  for (auto& [name, count] : entries_) {
    if (name == value) {
      ++count;
      return;
    }
  }
  entries_.emplace_back(std::string(value), 1);
}

ServerMetrics::ServerMetrics(MetricsConfig config)
    : config_(std::move(config)),
      endpoints_({"chat", "completions", "responses"}),
      finished_reasons_({"stop", "length", "tool_calls", "abort", "error"}),
      ttft_(ttft_bounds()),
      inter_token_(inter_token_bounds()),
      e2e_(request_phase_bounds()),
      queue_(request_phase_bounds()),
      prefill_(request_phase_bounds()),
      decode_(request_phase_bounds()),
      request_prompt_tokens_(token_count_bounds()),
      request_generation_tokens_(token_count_bounds()),
      spec_accepted_per_pos_(static_cast<std::size_t>(draft_positions(config_)), 0),
      spec_acceptance_length_(
          std::make_unique<Histogram>(acceptance_length_bounds(draft_positions(config_)))) {}

void ServerMetrics::request_received(std::string_view endpoint) {
  std::lock_guard lock(labels_mu_);
  endpoints_.add(endpoint);
}

void ServerMetrics::choice_finished(std::string_view reason) {
  std::lock_guard lock(labels_mu_);
  finished_reasons_.add(reason);
}

void ServerMetrics::http_response(std::string_view route, int status) {
  std::lock_guard lock(labels_mu_);
  auto it = http_responses_.find(route);  // no allocation once the route has been seen
  if (it == http_responses_.end()) it = http_responses_.try_emplace(std::string(route)).first;
  ++it->second[status];
}

void ServerMetrics::prompt_tokens(int64_t n, int64_t cached) {
  prompt_tokens_.fetch_add(non_negative(n), std::memory_order_relaxed);
  prompt_tokens_cached_.fetch_add(non_negative(cached), std::memory_order_relaxed);
}

void ServerMetrics::generation_tokens(int64_t n) {
  generation_tokens_.fetch_add(non_negative(n), std::memory_order_relaxed);
}

void ServerMetrics::set_running(int64_t rows) {
  running_.store(rows, std::memory_order_relaxed);
}

void ServerMetrics::set_waiting(int64_t requests) {
  waiting_.store(requests, std::memory_order_relaxed);
}

void ServerMetrics::set_decode_gap_max(double seconds) {
  decode_gap_max_.store(seconds, std::memory_order_relaxed);
}

void ServerMetrics::set_state_memory(std::size_t reserved, std::size_t budget) {
  state_memory_reserved_.store(reserved, std::memory_order_relaxed);
  state_memory_budget_.store(budget, std::memory_order_relaxed);
}

void ServerMetrics::set_kv_pool(std::size_t blocks, std::size_t bytes, std::size_t peak_bytes) {
  kv_pool_blocks_.store(blocks, std::memory_order_relaxed);
  kv_pool_bytes_.store(bytes, std::memory_order_relaxed);
  kv_pool_peak_bytes_.store(peak_bytes, std::memory_order_relaxed);
}

void ServerMetrics::set_prefix_cache(const engine::PrefixCacheStats& stats) {
  std::lock_guard lock(prefix_cache_mu_);
  prefix_cache_ = stats;
}

void ServerMetrics::set_grammar(const grammar::MaskStats& stats) {
  std::lock_guard lock(prefix_cache_mu_);
  grammar_ = stats;
}

void ServerMetrics::set_kv_cache_usage(double ratio) {
  kv_cache_usage_.store(ratio, std::memory_order_relaxed);
}

void ServerMetrics::observe_ttft(double s) {
  ttft_.observe(s);
}

void ServerMetrics::observe_inter_token(double dt, int64_t k) {
  if (k <= 0) return;
  inter_token_.observe(dt / static_cast<double>(k), static_cast<uint64_t>(k));
}

void ServerMetrics::observe_e2e(double s) {
  e2e_.observe(s);
}
void ServerMetrics::observe_queue(double s) {
  queue_.observe(s);
}
void ServerMetrics::observe_prefill(double s) {
  prefill_.observe(s);
}
void ServerMetrics::observe_decode(double s) {
  decode_.observe(s);
}

void ServerMetrics::observe_request_prompt_tokens(int64_t n) {
  request_prompt_tokens_.observe(static_cast<double>(n));
}

void ServerMetrics::observe_request_generation_tokens(int64_t n) {
  request_generation_tokens_.observe(static_cast<double>(n));
}

void ServerMetrics::spec_step(int drafted, int accepted) {
  std::lock_guard lock(spec_mu_);
  const int k = static_cast<int>(spec_accepted_per_pos_.size());
  drafted = std::clamp(drafted, 0, k);
  if (drafted == 0) return;
  accepted = std::clamp(accepted, 0, drafted);
  ++spec_drafts_;
  spec_draft_tokens_ += static_cast<uint64_t>(drafted);
  for (int i = 0; i < accepted; ++i) ++spec_accepted_per_pos_[static_cast<std::size_t>(i)];
  spec_acceptance_length_->observe(static_cast<double>(accepted + 1));
}

void ServerMetrics::set_draft_positions(int k) {
  k = std::max(k, 0);
  std::lock_guard lock(spec_mu_);
  spec_drafts_ = 0;
  spec_draft_tokens_ = 0;
  spec_accepted_per_pos_.assign(static_cast<std::size_t>(k), 0);
  spec_acceptance_length_ = std::make_unique<Histogram>(acceptance_length_bounds(k));
}

void ServerMetrics::decode_step() {
  decode_steps_.fetch_add(1, std::memory_order_relaxed);
}

void ServerMetrics::set_ready(bool ready) {
  ready_.store(ready, std::memory_order_relaxed);
}

std::string ServerMetrics::render() const {
  Writer w(config_.model_name);
  render_requests(w);
  render_tokens(w);
  render_gauges(w);
  render_prefix_cache(w);
  render_grammar(w);
  render_latencies(w);
  render_spec(w);
  render_status(w);
  return std::move(w).take();
}

void ServerMetrics::render_requests(Writer& w) const {
  std::lock_guard lock(labels_mu_);
  w.family("megadecode_requests_received_total", "counter",
           "Generation requests that passed validation.");
  for (const auto& [endpoint, count] : endpoints_.entries()) {
    w.sample("megadecode_requests_received_total", label("endpoint", endpoint),
             fmt::format("{}", count));
  }
  w.family("megadecode_requests_finished_total", "counter", "Choices finished, by reason.");
  for (const auto& [reason, count] : finished_reasons_.entries()) {
    w.sample("megadecode_requests_finished_total", label("finished_reason", reason),
             fmt::format("{}", count));
  }
  w.family("megadecode_http_requests_total", "counter",
           "Every HTTP response, by route and status.");
  for (const auto& [route, by_status] : http_responses_) {
    for (const auto& [status, count] : by_status) {
      w.sample("megadecode_http_requests_total",
               label("route", route) + label("status", fmt::format("{}", status)),
               fmt::format("{}", count));
    }
  }
}

void ServerMetrics::render_tokens(Writer& w) const {
  w.counter("megadecode_prompt_tokens_total", "Prompt tokens prefilled (cached tokens included).",
            prompt_tokens_.load(std::memory_order_relaxed));
  w.counter("megadecode_prompt_tokens_cached_total",
            "Prompt tokens served from a prefix cache (0 without one).",
            prompt_tokens_cached_.load(std::memory_order_relaxed));
  w.counter("megadecode_generation_tokens_total",
            "Output tokens counted in usage.completion_tokens.",
            generation_tokens_.load(std::memory_order_relaxed));
}

void ServerMetrics::render_gauges(Writer& w) const {
  w.gauge("megadecode_num_requests_running", "Rows occupied now.",
          fmt::format("{}", running_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_num_requests_waiting", "Queue depth: admitted requests without a row.",
          fmt::format("{}", waiting_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_num_rows", "Row capacity (maximum batch).",
          fmt::format("{}", config_.num_rows));
  w.gauge("megadecode_decode_gap_max_seconds",
          "Longest wait between two decode steps while rows decoded (prefill and admission in "
          "between), since start.",
          format_double(decode_gap_max_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_memory_reserved_bytes",
          "Sequence memory (KV caches, recurrent states) reserved by running requests.",
          fmt::format("{}", state_memory_reserved_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_memory_budget_bytes",
          "The sequence memory running requests may reserve at once (--kv-memory; 0: no limit).",
          fmt::format("{}", state_memory_budget_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_pool_blocks", "KV cache blocks held by sequences now (shared ones once).",
          fmt::format("{}", kv_pool_blocks_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_pool_used_bytes", "Memory of the KV cache blocks held now.",
          fmt::format("{}", kv_pool_bytes_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_pool_peak_bytes",
          "The most memory KV cache blocks have held, since start.",
          fmt::format("{}", kv_pool_peak_bytes_.load(std::memory_order_relaxed)));
  w.gauge("megadecode_kv_cache_usage_ratio", "Fraction of sequence-state memory in use, 0-1.",
          format_double(kv_cache_usage_.load(std::memory_order_relaxed)));
}

void ServerMetrics::render_prefix_cache(Writer& w) const {
  engine::PrefixCacheStats s;
  {
    std::lock_guard lock(prefix_cache_mu_);
    s = prefix_cache_;
  }
  auto ratio = [](int64_t part, int64_t whole) {
    return format_double(whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  };
  w.counter("megadecode_prefix_cache_lookups_total", "Prompts looked up in the prefix cache.",
            static_cast<uint64_t>(s.lookups));
  w.counter("megadecode_prefix_cache_hits_total",
            "Prompts that resumed from a state in the prefix cache.",
            static_cast<uint64_t>(s.hits));
  w.gauge("megadecode_prefix_cache_hit_ratio", "Prefix cache hits per lookup, since start.",
          ratio(s.hits, s.lookups));
  w.gauge("megadecode_prefix_cache_token_hit_ratio",
          "Prompt tokens resumed from the prefix cache per prompt token looked up, since start.",
          ratio(s.reused_tokens, s.looked_up_tokens));
  w.counter("megadecode_prefix_cache_stored_total", "States the prefix cache has kept.",
            static_cast<uint64_t>(s.stored));
  w.counter("megadecode_prefix_cache_evictions_total",
            "States the prefix cache dropped to stay within its memory budget.",
            static_cast<uint64_t>(s.evicted));
  w.gauge("megadecode_prefix_cache_states", "States the prefix cache holds now.",
          fmt::format("{}", s.checkpoints));
  w.gauge("megadecode_prefix_cache_bytes", "Memory charged to the states the prefix cache holds.",
          fmt::format("{}", s.bytes));
  w.gauge("megadecode_prefix_cache_budget_bytes",
          "The prefix cache's memory budget (--prefix-cache-memory; 0: off).",
          fmt::format("{}", s.budget));
}

void ServerMetrics::render_grammar(Writer& w) const {
  grammar::MaskStats s;
  {
    std::lock_guard lock(prefix_cache_mu_);
    s = grammar_;
  }
  w.counter("megadecode_grammar_masks_total",
            "Token masks structured output applied (one per constrained token).", s.masks);
  w.counter("megadecode_grammar_masks_computed_total",
            "Of those, masks computed by a vocabulary walk (not found in a grammar's cache).",
            s.computed);
  w.counter_value("megadecode_grammar_mask_seconds_total",
                  "Time spent computing token masks (the cached ones cost a lookup).",
                  format_double(s.compute_seconds));
}

void ServerMetrics::render_latencies(Writer& w) const {
  w.histogram("megadecode_time_to_first_token_seconds", "Arrival to first output token.",
              ttft_.snapshot());
  w.histogram("megadecode_inter_token_latency_seconds",
              "Per output token: dt/k, k times, when k tokens arrive dt after the previous "
              "emission of that choice.",
              inter_token_.snapshot());
  w.histogram("megadecode_e2e_request_latency_seconds", "Arrival to last token of the request.",
              e2e_.snapshot());
  w.histogram("megadecode_request_queue_time_seconds", "Arrival to row assigned.",
              queue_.snapshot());
  w.histogram("megadecode_request_prefill_time_seconds", "Row assigned to first output token.",
              prefill_.snapshot());
  w.histogram("megadecode_request_decode_time_seconds", "First to last output token.",
              decode_.snapshot());
  w.histogram("megadecode_request_prompt_tokens", "Prompt length per request.",
              request_prompt_tokens_.snapshot());
  w.histogram("megadecode_request_generation_tokens", "Output length per choice.",
              request_generation_tokens_.snapshot());
}

ServerMetrics::SpecSnapshot ServerMetrics::spec_snapshot() const {
  std::lock_guard lock(spec_mu_);
  SpecSnapshot s;
  s.drafts = spec_drafts_;
  s.draft_tokens = spec_draft_tokens_;
  s.accepted_per_pos = spec_accepted_per_pos_;
  // Derived rather than counted separately, so it equals the per-position sum by construction.
  for (uint64_t n : s.accepted_per_pos) s.accepted += n;
  s.acceptance_length = spec_acceptance_length_->snapshot();
  return s;
}

void ServerMetrics::render_spec(Writer& w) const {
  const SpecSnapshot s = spec_snapshot();
  w.counter("megadecode_spec_decode_num_drafts_total", "Verify steps that carried drafts.",
            s.drafts);
  w.counter("megadecode_spec_decode_num_draft_tokens_total", "Draft tokens proposed.",
            s.draft_tokens);
  w.counter("megadecode_spec_decode_num_accepted_tokens_total",
            "Draft tokens accepted (bonus token excluded).", s.accepted);
  w.family("megadecode_spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Acceptances at each draft position.");
  for (std::size_t pos = 0; pos < s.accepted_per_pos.size(); ++pos) {
    w.sample("megadecode_spec_decode_num_accepted_tokens_per_pos_total",
             label("position", fmt::format("{}", pos)), fmt::format("{}", s.accepted_per_pos[pos]));
  }
  const double mean =
      s.drafts == 0 ? 0.0 : 1.0 + static_cast<double>(s.accepted) / static_cast<double>(s.drafts);
  w.gauge("megadecode_spec_decode_mean_acceptance_length",
          "Since start: 1 + accepted/drafts (0 before the first draft).", format_double(mean));
  w.histogram("megadecode_spec_decode_acceptance_length", "Tokens committed per verify step.",
              s.acceptance_length);
}

void ServerMetrics::render_status(Writer& w) const {
  w.counter("megadecode_decode_steps_total", "Engine steps executed.",
            decode_steps_.load(std::memory_order_relaxed));
  w.gauge("megadecode_ready", "1 when /health would return 200.",
          ready_.load(std::memory_order_relaxed) ? "1" : "0");
  w.family("megadecode_build_info", "gauge", "Build information; always 1.");
  w.sample("megadecode_build_info",
           label("version", config_.version) + label("revision", config_.revision) +
               label("executor", config_.executor),
           "1");
}

}  // namespace md::server
