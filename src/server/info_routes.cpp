// The probes and descriptions: /health, /v1/models, /v1/models/{id}, /metrics, /version, /props,
// /slots (§1.1, §1.2, §1.5, §1.6).
#include "kernels/kv_block_pool.h"
#include "server/routes.h"

namespace md::server {
namespace {

using json = nlohmann::ordered_json;

json model_object(const ServerContext& context, const std::string& id) {
  return json{{"id", id},
              {"object", "model"},
              {"created", context.created},
              {"owned_by", "megadecode"},
              {"max_model_len", context.model.context}};
}

void refresh_gauges(ServerContext& context) {
  context.metrics.set_ready(context.state.load() == ServerState::kReady);
  if (!context.scheduler) return;
  engine::SchedulerSnapshot s = context.scheduler->snapshot();
  context.metrics.set_running(s.running_rows);
  context.metrics.set_waiting(s.waiting_requests);
  context.metrics.set_kv_cache_usage(s.state_usage);
  context.metrics.set_decode_gap_max(s.worst_decode_gap_seconds);
  context.metrics.set_state_memory(s.state_memory_reserved, s.state_memory_budget);
  context.metrics.set_prefix_cache(s.prefix_cache.value_or(engine::PrefixCacheStats{}));
  if (context.constraints) context.metrics.set_grammar(context.constraints->stats());
  const kernels::KvPoolUse pool = kernels::KvBlockPool::shared().use();
  context.metrics.set_kv_pool(pool.blocks, pool.bytes, pool.peak_bytes);
}

}  // namespace

void handle_health(ServerContext& context, const HttpRequest&, HttpResponse& res) {
  context.require_ready();
  json body{{"status", "ok"}};
  engine::SchedulerSnapshot s = context.scheduler->snapshot();
  body["rows_busy"] = s.running_rows;
  body["queue"] = s.waiting_requests;
  send_json(res, body);
}

void handle_models(ServerContext& context, const HttpRequest&, HttpResponse& res) {
  send_json(res, json{{"object", "list"},
                      {"data", json::array({model_object(context, context.names.front())})}});
}

void handle_model(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  std::string id = req.path_parameter;
  for (const std::string& name : context.names) {
    if (name == id) {
      send_json(res, model_object(context, context.names.front()));
      return;
    }
  }
  throw model_not_found(id, 404);
}

void handle_metrics(ServerContext& context, const HttpRequest&, HttpResponse& res) {
  refresh_gauges(context);
  res.set_content(context.metrics.render(), ServerMetrics::kContentType);
}

void handle_version(ServerContext& context, const HttpRequest&, HttpResponse& res) {
  send_json(res, json{{"version", "megadecode " + context.build.version + " (" +
                                      context.build.revision + ")"}});
}

// {"method", "num_draft_tokens"} while the server speculates, else null (openai-api.md §1.6).
json speculative_info(const ServerContext& context) {
  if (context.model.drafter == nullptr || !context.scheduler) return nullptr;
  return json{{"method", context.model.speculative_method},
              {"num_draft_tokens", context.scheduler->draft_positions()}};
}

void handle_props(ServerContext& context, const HttpRequest&, HttpResponse& res) {
  context.require_tokenizer();
  const engine::SamplingParams& d = context.model.sampling_defaults;
  json defaults{
      {"temperature", json_float(d.temperature)},
      {"top_p", json_float(d.top_p)},
      {"top_k", d.top_k > 0 ? d.top_k : -1},
      {"min_p", json_float(d.min_p)},
      {"max_tokens", context.options.default_max_tokens ? json(*context.options.default_max_tokens)
                                                        : json(nullptr)}};
  json body{
      {"model", context.names.front()},
      {"max_model_len", context.model.context},
      {"max_prompt_tokens", context.max_prompt_tokens()},
      {"total_slots", context.options.max_batch},
      {"vocab_size", context.model.model->vocab_size()},
      {"chat_template",
       context.model.chat_template ? json(context.model.chat_template->source()) : json(nullptr)},
      {"speculative", speculative_info(context)},
      {"default_generation_settings", std::move(defaults)},
      {"build_info", context.build.version + " (" + context.build.revision + ")"}};
  send_json(res, body);
}

void handle_slots(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  context.require_ready();
  engine::SchedulerSnapshot s = context.scheduler->snapshot();
  json slots = json::array();
  for (const engine::SlotInfo& slot : s.slots) {
    json entry{{"id", slot.id}, {"is_processing", slot.busy}};
    if (slot.busy) {
      entry["request_id"] = slot.request_id;
      entry["n_prompt_tokens"] = slot.prompt_tokens;
      entry["n_decoded"] = slot.decoded;
      // No seed: with it, anyone who can read /slots could replay another user's sampled reply.
      entry["params"] = json{{"temperature", json_float(slot.params.temperature)},
                             {"top_p", json_float(slot.params.top_p)},
                             {"max_tokens", slot.max_tokens}};
    }
    slots.push_back(std::move(entry));
  }
  if (req.query_value("fail_on_no_slot") == "1" && s.running_rows >= s.rows) {
    throw ApiError(503, "unavailable_error", "no_slot_available", std::nullopt,
                   "Every row is busy.");
  }
  send_json(res, slots);
}

}  // namespace md::server
