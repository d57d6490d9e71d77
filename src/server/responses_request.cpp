#include "server/responses_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace md::server {
namespace {

std::string at(std::string_view base, std::size_t index) {
  return fmt::format("{}[{}]", base, index);
}

// The joined text of a content array's parts ("input_text", "output_text", "text"; the summary
// and reasoning items' "summary_text" / "reasoning_text"); any other part type is refused.
std::string parts_text(const Json& parts, const std::string& path,
                       std::initializer_list<std::string_view> kinds) {
  std::string text;
  const Json& list = as_array(parts, path);
  for (std::size_t j = 0; j < list.size(); ++j) {
    const std::string part_path = at(path, j);
    const FieldReader part(as_object(list[j], part_path), part_path + ".");
    if (std::ranges::find(kinds, part.string("type").value_or("")) == kinds.end()) {
      throw unsupported_value(part.path("type"),
                              list[j].contains("type") ? list[j]["type"] : Json(nullptr));
    }
    text += as_string(part.required("text"), part.path("text"));
  }
  return text;
}

// A string, or text parts joined.
Json text_content(const Json& content, const std::string& path) {
  return content.is_string()
             ? content
             : Json(parts_text(content, path, {"input_text", "output_text", "text"}));
}

// Input items → chat messages. Function calls join the assistant message just before them (one
// assistant turn with content and calls, as the chat templates expect); a reasoning item's text
// goes to the assistant message or call right after it (nothing else in between).
class InputMessages {
 public:
  Json take() { return std::move(messages_); }

  void add(const Json& item, const std::string& path) {
    const FieldReader r(as_object(item, path), path + ".");
    const std::string type = r.string("type").value_or("message");
    if (type == "message") return message(r);
    if (type == "function_call") return function_call(r);
    if (type == "function_call_output") return call_output(r);
    if (type == "reasoning") return reasoning(r, item);
    throw unsupported_value(r.path("type"), item["type"]);
  }

  void user_text(const std::string& text) {
    messages_.push_back(Json{{"role", "user"}, {"content", text}});
  }

 private:
  void message(const FieldReader& r) {
    const std::string role = as_string(r.required("role"), r.path("role"));
    if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
      throw invalid_choice(r.path("role"), {"user", "system", "developer", "assistant"});
    }
    Json message{{"role", role},
                 {"content", text_content(r.required("content"), r.path("content"))}};
    if (role == "assistant") {
      attach_reasoning(message);
    } else {
      pending_reasoning_.clear();  // reasoning belongs to the assistant turn right after it
    }
    messages_.push_back(std::move(message));
  }

  void function_call(const FieldReader& r) {
    Json call{
        {"id", as_string(r.required("call_id"), r.path("call_id"))},
        {"type", "function"},
        {"function", Json{{"name", as_string(r.required("name"), r.path("name"))},
                          {"arguments", as_string(r.required("arguments"), r.path("arguments"))}}}};
    if (messages_.empty() || messages_.back()["role"] != "assistant") {
      Json message{{"role", "assistant"}, {"content", nullptr}};
      attach_reasoning(message);
      messages_.push_back(std::move(message));
    }
    Json& last = messages_.back();
    if (!last.contains("tool_calls")) last["tool_calls"] = Json::array();
    last["tool_calls"].push_back(std::move(call));
  }

  void call_output(const FieldReader& r) {
    pending_reasoning_.clear();
    messages_.push_back(Json{{"role", "tool"},
                             {"tool_call_id", as_string(r.required("call_id"), r.path("call_id"))},
                             {"content", text_content(r.required("output"), r.path("output"))}});
  }

  void reasoning(const FieldReader& r, const Json& item) {
    // The reasoning text itself, or else its summary.
    if (r.has("content")) {
      pending_reasoning_ +=
          parts_text(item["content"], r.path("content"), {"reasoning_text", "text"});
    } else if (r.has("summary")) {
      pending_reasoning_ +=
          parts_text(item["summary"], r.path("summary"), {"summary_text", "text"});
    }
  }

  void attach_reasoning(Json& message) {
    if (pending_reasoning_.empty()) return;
    message["reasoning_content"] = std::exchange(pending_reasoning_, {});
  }

  Json messages_ = Json::array();
  std::string pending_reasoning_;
};

// A function tool of the Responses form ({"type":"function","name",...}) in the chat form.
Json chat_tool(const Json& tool, const std::string& path) {
  const FieldReader r(as_object(tool, path), path + ".");
  const std::string type = as_string(r.required("type"), r.path("type"));
  if (type != "function") throw unsupported_value(r.path("type"), tool["type"]);
  Json function{{"name", as_string(r.required("name"), r.path("name"))}};
  if (r.has("description")) function["description"] = tool["description"];
  if (r.has("parameters")) function["parameters"] = tool["parameters"];
  if (r.has("strict")) function["strict"] = tool["strict"];
  return Json{{"type", "function"}, {"function", std::move(function)}};
}

Json chat_tool_choice(const Json& choice) {
  if (!choice.is_object()) return choice;  // "none" | "auto" | "required", checked by chat
  const FieldReader r(choice, "tool_choice.");
  const std::string type = as_string(r.required("type"), r.path("type"));
  if (type != "function") throw unsupported_value(r.path("type"), choice["type"]);
  return Json{{"type", "function"},
              {"function", Json{{"name", as_string(r.required("name"), r.path("name"))}}}};
}

void refuse_unsupported(const FieldReader& r, const Json& body) {
  if (r.boolean("background").value_or(false)) {
    throw unsupported_value("background", body["background"]);
  }
  if (const std::optional<std::string> truncation = r.string("truncation");
      truncation && *truncation != "disabled") {
    throw unsupported_value("truncation", body["truncation"]);
  }
  for (const char* key : {"conversation", "prompt"}) {
    if (r.has(key)) throw unsupported_parameter(key);
  }
}

// text.format (flat: {"type": "json_schema", "name", "schema", "strict"}) as chat's nested
// response_format; absent or "text": none.
std::optional<Json> chat_response_format(const Json& text) {
  const FieldReader t(text, "text.");
  const Json* format = t.object("format");
  if (format == nullptr) return std::nullopt;
  const FieldReader f(*format, "text.format.");
  const std::string type = as_string(f.required("type"), f.path("type"));
  if (type == "text") return std::nullopt;
  if (type != "json_schema") return Json{{"type", type}};
  Json spec = Json::object();
  for (const char* key : {"name", "schema", "strict", "description"}) {
    if (f.has(key)) spec[key] = (*format)[key];
  }
  return Json{{"type", "json_schema"}, {"json_schema", std::move(spec)}};
}

constexpr IntegerRule kMaxOutputTokensRule{1, std::numeric_limits<int32_t>::max(),
                                           "an integer between 1 and 2147483647"};

// OpenAI's limits on metadata (it is stored with the response): at most 16 pairs, keys up to 64
// characters, string values up to 512.
Json checked_metadata(const Json& metadata) {
  if (metadata.size() > 16) {
    throw invalid_value_message("metadata", "'metadata' has at most 16 key-value pairs.");
  }
  for (const auto& [key, value] : metadata.items()) {
    const std::string path = "metadata." + key;
    if (key.size() > 64) {
      throw invalid_value_message("metadata", "A 'metadata' key has at most 64 characters.");
    }
    if (as_string(value, path).size() > 512) {
      throw invalid_value_message(path, "A 'metadata' value has at most 512 characters.");
    }
  }
  return metadata;
}

// The chat fields that keep their names (extensions like seed and top_k included).
constexpr const char* kSharedFields[] = {"model",
                                         "temperature",
                                         "top_p",
                                         "parallel_tool_calls",
                                         "seed",
                                         "top_k",
                                         "min_p",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "stop",
                                         "logit_bias",
                                         "repetition_penalty",
                                         "min_tokens",
                                         "ignore_eos",
                                         "stop_token_ids",
                                         "chat_template_kwargs",
                                         "enable_thinking",
                                         "skip_special_tokens"};

// Names `new_param` where the error named `old_param`, in its param and its message.
void rename_param(ApiError& error, const std::string& old_param, const std::string& new_param) {
  for (std::size_t p = error.message.find(old_param); p != std::string::npos;
       p = error.message.find(old_param, p + new_param.size())) {
    error.message.replace(p, old_param.size(), new_param);
  }
  error.param = new_param;
}

// A chat-side error reported in the Responses request's terms.
ApiError in_responses_terms(ApiError error) {
  if (!error.param) return error;
  const std::string param = *error.param;
  constexpr std::pair<std::string_view, std::string_view> kRenamed[] = {
      {"max_completion_tokens", "max_output_tokens"},
      {"reasoning_effort", "reasoning.effort"},
      {"response_format.json_schema", "text.format"},
      {"response_format", "text.format"}};
  for (const auto& [chat_name, name] : kRenamed) {
    if (param.starts_with(chat_name)) {
      rename_param(error, param, std::string(name) + param.substr(chat_name.size()));
      return error;
    }
  }
  if (param.starts_with("messages")) {
    rename_param(error, param, "input");  // indices differ: name the field
  } else if (const std::size_t fn = param.find("].function");
             param.starts_with("tools[") && fn != std::string::npos) {
    // tools[i].function.x → tools[i].x: the Responses form has no "function" level.
    rename_param(error, param,
                 std::string(param).erase(fn + 1, std::string_view(".function").size()));
  }
  return error;
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits,
                                         const ResponseStore& store) {
  const FieldReader r(body);
  ResponsesRequest out;
  refuse_unsupported(r, body);

  InputMessages input;
  const Json& raw_input = r.required("input");
  if (raw_input.is_string()) {
    input.user_text(raw_input.get<std::string>());
  } else {
    const Json& items = as_array(raw_input, "input");
    for (std::size_t i = 0; i < items.size(); ++i) input.add(items[i], at("input", i));
  }
  out.instructions = r.string("instructions");
  out.max_output_tokens = r.integer("max_output_tokens", kMaxOutputTokensRule);
  out.previous_response_id = r.string("previous_response_id");
  out.store = r.boolean("store").value_or(true);
  if (const Json* metadata = r.object("metadata")) out.metadata = checked_metadata(*metadata);
  if (const std::optional<std::string> user = r.string("user")) out.user = *user;

  Json chat{{"messages", Json::array()}};
  for (const char* key : kSharedFields) {
    if (r.has(key)) chat[key] = body[key];
  }
  if (const Json* tools = r.array("tools")) {
    out.tools = *tools;
    Json chat_tools = Json::array();
    for (std::size_t i = 0; i < tools->size(); ++i) {
      chat_tools.push_back(chat_tool((*tools)[i], at("tools", i)));
    }
    chat["tools"] = std::move(chat_tools);
  }
  if (r.has("tool_choice")) {
    out.tool_choice = body["tool_choice"];
    chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
  }
  if (const Json* reasoning = r.object("reasoning")) {
    const FieldReader rr(*reasoning, "reasoning.");
    if (const std::optional<std::string> effort = rr.string("effort")) {
      out.reasoning_effort = *effort;
      chat["reasoning_effort"] = *effort;
    }
  }
  if (out.max_output_tokens) chat["max_completion_tokens"] = *out.max_output_tokens;
  if (const Json* text = r.object("text")) {
    if (std::optional<Json> format = chat_response_format(*text)) {
      chat["response_format"] = std::move(*format);
    }
  }
  chat["stream"] = r.boolean("stream").value_or(false);

  if (out.previous_response_id) {
    std::shared_ptr<const StoredResponse> previous = store.get(*out.previous_response_id);
    if (!previous) {
      throw invalid_value_message(
          "previous_response_id",
          fmt::format("Previous response with id '{}' not found.", *out.previous_response_id));
    }
    out.conversation = previous->conversation;
  }
  for (Json& message : input.take()) out.conversation.push_back(std::move(message));
  if (out.instructions) {
    chat["messages"].push_back(Json{{"role", "system"}, {"content", *out.instructions}});
  }
  for (const Json& message : out.conversation) chat["messages"].push_back(message);

  try {
    out.chat = parse_chat_request(chat, limits);
  } catch (const ApiError& e) {
    throw in_responses_terms(e);
  }
  return out;
}

}  // namespace md::server
