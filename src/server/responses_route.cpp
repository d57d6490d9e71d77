// POST /v1/responses, GET and DELETE /v1/responses/{id} (docs/openai-api.md §14): the Responses
// API over the chat machinery. The request becomes a chat request (responses_request.h); the
// output is shaped as output items (reasoning, message, function calls) and, when streaming, as
// the typed events the official SDKs accumulate.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/chat_run.h"
#include "server/generation_route.h"
#include "server/json_body.h"
#include "server/responses_request.h"
#include "server/routes.h"

namespace md::server {
namespace {

using json = nlohmann::ordered_json;

enum class ItemKind { kReasoning, kMessage, kFunctionCall };

struct OutputItem {
  ItemKind kind;
  std::string id;
  std::string text;  // reasoning or message text
  ToolCall call;     // function calls
  bool done = false;
  bool cut = false;  // the token limit ended it
};

bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

json text_part(const OutputItem& item) {
  if (item.kind == ItemKind::kReasoning)
    return json{{"type", "reasoning_text"}, {"text", item.text}};
  return json{{"type", "output_text"},
              {"text", item.text},
              {"annotations", json::array()},
              {"logprobs", json::array()}};
}

// The item as it stands; an open item's content is empty (its part is announced separately).
json item_json(const OutputItem& item) {
  const char* status = !item.done ? "in_progress" : item.cut ? "incomplete" : "completed";
  switch (item.kind) {
    case ItemKind::kReasoning:
      return json{{"id", item.id},
                  {"type", "reasoning"},
                  {"summary", json::array()},
                  {"content", item.done ? json::array({text_part(item)}) : json::array()},
                  {"status", status}};
    case ItemKind::kMessage:
      return json{{"id", item.id},
                  {"type", "message"},
                  {"status", status},
                  {"role", "assistant"},
                  {"content", item.done ? json::array({text_part(item)}) : json::array()}};
    case ItemKind::kFunctionCall:
      break;
  }
  return json{{"id", item.id},           {"type", "function_call"},
              {"status", status},        {"arguments", item.done ? item.call.arguments : ""},
              {"call_id", item.call.id}, {"name", item.call.name}};
}

class ResponsesFormatter : public ResponseFormatter {
 public:
  ResponsesFormatter(ServerContext& context, ResponsesRequest request, std::string id,
                     const engine::SamplingParams& sampling)
      : context_(context),
        request_(std::move(request)),
        id_(std::move(id)),
        temperature_(json_float(sampling.temperature)),
        top_p_(json_float(sampling.top_p)) {}

  std::vector<json> opening_chunks() override {
    std::vector<json> out;
    emit(out, event("response.created", {{"response", response_object("in_progress", nullptr)}}));
    emit(out,
         event("response.in_progress", {{"response", response_object("in_progress", nullptr)}}));
    return out;
  }

  std::vector<json> chunks(ChoiceUpdate& update) override {
    std::vector<json> out;
    apply(update.delta, &out);
    return out;
  }

  void collect(ChoiceUpdate& update) override { apply(update.delta, nullptr); }

  json final_response(const RequestRun& run) override {
    json response = response_object(final_status(), &run);
    keep(response);
    return response;
  }

  std::vector<json> closing_chunks(const RequestRun& run) override {
    const std::string status = final_status();
    json response = response_object(status, &run);
    keep(response);
    std::vector<json> out;
    emit(out, event(status == "completed" ? "response.completed" : "response.incomplete",
                    {{"response", std::move(response)}}));
    return out;
  }

  json usage(const RequestRun& run) override {
    const int64_t output = run.completion_tokens();
    return json{{"input_tokens", run.prompt_tokens()},
                {"input_tokens_details", json{{"cached_tokens", run.cached_tokens()}}},
                {"output_tokens", output},
                {"output_tokens_details", json{{"reasoning_tokens", run.reasoning_tokens()}}},
                {"total_tokens", run.prompt_tokens() + output}};
  }

  json usage_chunk(const RequestRun& run) override { return usage(run); }

  std::string sse_event(const json& payload) override {
    return "event: " + payload.value("type", std::string("message")) +
           "\ndata: " + dump_json(payload) + "\n\n";
  }

  std::vector<json> error_chunks(json error_body) override {
    const json& error = error_body["error"];
    std::vector<json> out;
    emit(out, event("error", {{"code", error["code"]},
                              {"message", error["message"]},
                              {"param", error["param"]}}));
    json failed = response_object("failed", nullptr);
    failed["error"] = json{{"code", error["code"]}, {"message", error["message"]}};
    emit(out, event("response.failed", {{"response", std::move(failed)}}));
    return out;
  }

  bool ends_with_done() const override { return false; }

 private:
  static json event(const char* type, json fields) {
    json e{{"type", type}};
    for (auto& [key, value] : fields.items()) e[key] = std::move(value);
    return e;
  }

  // Numbers the event and adds it, when streaming (`out` is null when collecting).
  void emit(std::vector<json>* out, json e) {
    if (out == nullptr) return;
    e["sequence_number"] = sequence_++;
    out->push_back(std::move(e));
  }
  void emit(std::vector<json>& out, json e) { emit(&out, std::move(e)); }

  json position(std::size_t index) const {
    return json{{"item_id", items_[index].id}, {"output_index", index}};
  }
  // An item's only content part (its text).
  json content_position(std::size_t index) const {
    json at = position(index);
    at["content_index"] = 0;
    return at;
  }

  // One poll's output for the only choice, in the order the model wrote it.
  void apply(ChoiceDelta& delta, std::vector<json>* out) {
    if (!delta.reasoning.empty()) append_text(ItemKind::kReasoning, delta.reasoning, out);
    if (!delta.content.empty()) content(delta.content, out);
    for (ToolCall& call : delta.tool_calls) function_call(std::move(call), out);
    if (delta.finished) {
      finish_reason_ = delta.finish_reason;
      if (finish_reason_ == "length") {
        // The item the limit cut is incomplete, and nothing follows it.
        if (open_) items_.back().cut = true;
      } else if (!has(ItemKind::kMessage) && !has(ItemKind::kFunctionCall)) {
        // Without an answer or a call the output still ends in a message (what clients read
        // as output_text): the held whitespace, or empty.
        append_text(ItemKind::kMessage, std::exchange(held_, {}), out);
      }
      close_open(out);
    }
  }

  bool has(ItemKind kind) const {
    for (const OutputItem& item : items_) {
      if (item.kind == kind) return true;
    }
    return false;
  }

  bool open_message() const { return open_ && items_.back().kind == ItemKind::kMessage; }

  // Answer text: whitespace before a message starts is held back, so that the blank lines a
  // model writes before a tool call do not become a message of their own.
  void content(const std::string& text, std::vector<json>* out) {
    if (!open_message() && blank(text)) {
      held_ += text;
      return;
    }
    append_text(ItemKind::kMessage, std::exchange(held_, {}) + text, out);
  }

  void append_text(ItemKind kind, const std::string& text, std::vector<json>* out) {
    if (!open_ || items_.back().kind != kind) open(kind, out);
    const std::size_t index = items_.size() - 1;
    items_[index].text += text;
    if (text.empty()) return;
    json e = event(kind == ItemKind::kReasoning ? "response.reasoning_text.delta"
                                                : "response.output_text.delta",
                   content_position(index));
    e["delta"] = text;
    if (kind == ItemKind::kMessage) e["logprobs"] = json::array();
    emit(out, std::move(e));
  }

  void open(ItemKind kind, std::vector<json>* out) {
    close_open(out);
    OutputItem item{kind, random_id(kind == ItemKind::kReasoning ? "rs_" : "msg_"), {}, {}};
    items_.push_back(std::move(item));
    open_ = true;
    const std::size_t index = items_.size() - 1;
    emit(out, event("response.output_item.added",
                    {{"output_index", index}, {"item", item_json(items_[index])}}));
    json part = event("response.content_part.added", content_position(index));
    part["part"] = text_part(items_[index]);
    emit(out, std::move(part));
  }

  void close_open(std::vector<json>* out) {
    if (!open_) return;
    open_ = false;
    const std::size_t index = items_.size() - 1;
    OutputItem& item = items_[index];
    item.done = true;
    json done = event(item.kind == ItemKind::kReasoning ? "response.reasoning_text.done"
                                                        : "response.output_text.done",
                      content_position(index));
    done["text"] = item.text;
    if (item.kind == ItemKind::kMessage) done["logprobs"] = json::array();
    emit(out, std::move(done));
    json part = event("response.content_part.done", content_position(index));
    part["part"] = text_part(item);
    emit(out, std::move(part));
    emit(out,
         event("response.output_item.done", {{"output_index", index}, {"item", item_json(item)}}));
  }

  // A call arrives whole (the parser releases it complete): its item opens and closes at once.
  void function_call(ToolCall call, std::vector<json>* out) {
    close_open(out);
    held_.clear();
    items_.push_back(OutputItem{ItemKind::kFunctionCall, random_id("fc_"), {}, std::move(call)});
    const std::size_t index = items_.size() - 1;
    OutputItem& item = items_[index];
    emit(out,
         event("response.output_item.added", {{"output_index", index}, {"item", item_json(item)}}));
    json delta = event("response.function_call_arguments.delta", position(index));
    delta["delta"] = item.call.arguments;
    emit(out, std::move(delta));
    json done = event("response.function_call_arguments.done", position(index));
    done["name"] = item.call.name;
    done["arguments"] = item.call.arguments;
    emit(out, std::move(done));
    item.done = true;
    emit(out,
         event("response.output_item.done", {{"output_index", index}, {"item", item_json(item)}}));
  }

  std::string final_status() const {
    return finish_reason_ == "length" ? "incomplete" : "completed";
  }

  json response_object(const std::string& status, const RequestRun* run) {
    json output = json::array();
    if (status != "in_progress") {
      for (const OutputItem& item : items_) output.push_back(item_json(item));
    }
    const json incomplete =
        status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
    return json{
        {"id", id_},
        {"object", "response"},
        {"created_at", created_},
        {"status", status},
        {"background", false},
        {"error", nullptr},
        {"incomplete_details", incomplete},
        {"instructions", request_.instructions ? json(*request_.instructions) : json(nullptr)},
        {"max_output_tokens",
         request_.max_output_tokens ? json(*request_.max_output_tokens) : json(nullptr)},
        {"model", request_.chat.model},
        {"output", std::move(output)},
        {"parallel_tool_calls", request_.chat.parallel_tool_calls},
        {"previous_response_id",
         request_.previous_response_id ? json(*request_.previous_response_id) : json(nullptr)},
        {"reasoning", json{{"effort", request_.reasoning_effort}, {"summary", nullptr}}},
        {"store", request_.store},
        {"temperature", temperature_},
        {"text", json{{"format", json{{"type", "text"}}}}},
        {"tool_choice", request_.tool_choice},
        {"tools", request_.tools},
        {"top_p", top_p_},
        {"truncation", "disabled"},
        {"usage", run != nullptr ? usage(*run) : json(nullptr)},
        {"user", request_.user},
        {"metadata", request_.metadata}};
  }

  // Stores the finished response with its conversation (store=true): the input's messages, then
  // the output as one assistant turn.
  void keep(const json& response) {
    if (!request_.store || kept_) return;
    kept_ = true;
    json turn{{"role", "assistant"}, {"content", nullptr}};
    std::string reasoning, text;
    json calls = json::array();
    for (const OutputItem& item : items_) {
      if (item.kind == ItemKind::kReasoning) reasoning += item.text;
      if (item.kind == ItemKind::kMessage) text += item.text;
      if (item.kind == ItemKind::kFunctionCall) {
        calls.push_back(
            json{{"id", item.call.id},
                 {"type", "function"},
                 {"function", json{{"name", item.call.name}, {"arguments", item.call.arguments}}}});
      }
    }
    if (!text.empty() || calls.empty()) turn["content"] = text;
    if (!reasoning.empty()) turn["reasoning_content"] = reasoning;
    if (!calls.empty()) turn["tool_calls"] = std::move(calls);
    StoredResponse stored{response, request_.conversation};
    stored.conversation.push_back(std::move(turn));
    context_.responses.put(id_, std::move(stored));
  }

  ServerContext& context_;
  ResponsesRequest request_;
  std::string id_;
  double temperature_, top_p_;
  std::vector<OutputItem> items_;
  bool open_ = false;  // the last item is open
  std::string held_;   // whitespace not yet given to a message
  std::string finish_reason_;
  int64_t sequence_ = 0;
  bool kept_ = false;
};

ApiError response_not_found(const std::string& id) {
  return ApiError(404, "invalid_request_error", "not_found", std::nullopt,
                  "Response with id '" + id + "' not found.");
}

}  // namespace

void handle_responses(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  auto arrival = std::chrono::steady_clock::now();
  json body = parse_json_body(req.body);
  context.require_ready();
  ResponsesRequest request = parse_responses_request(body, context.limits, context.responses);
  std::string id = random_id("resp_");
  ChatRun chat = start_chat_run(context, req, request.chat, id, "input", "responses", arrival);
  const bool stream = request.chat.stream;
  auto formatter = std::make_shared<ResponsesFormatter>(context, std::move(request), id,
                                                        chat.engine_request.sampling);
  respond(req, res, std::move(chat.run), std::move(formatter), stream, false);
}

void handle_response_by_id(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  const std::string& id = req.path_parameter;
  if (req.method == "DELETE") {
    if (!context.responses.erase(id)) throw response_not_found(id);
    send_json(res, json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
    return;
  }
  std::shared_ptr<const StoredResponse> stored = context.responses.get(id);
  if (!stored) throw response_not_found(id);
  send_json(res, stored->response);
}

}  // namespace md::server
