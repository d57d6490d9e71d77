#include "text/kimi_xtml_chat.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "text/jinja/error.h"
#include "text/jinja/json.h"
#include "text/jinja/unicode.h"

namespace md {

namespace {

using json = nlohmann::ordered_json;
using Attributes = std::vector<std::pair<std::string, std::string>>;

[[noreturn]] void refuse(const std::string& reason) {
  throw jinja::TemplateError(jinja::TemplateError::Kind::kRaised, "kimi_k3_xtml", {}, reason);
}

std::string dumps(const json& value, bool compact_sorted) {
  jinja::JsonDumpOptions options;
  if (compact_sorted) {
    options.item_separator = ",";
    options.key_separator = ":";
    options.sort_keys = true;
  }
  try {
    return jinja::dump_json(jinja::from_json(value), options);
  } catch (const jinja::TemplateError&) {
    throw;
  } catch (const std::exception& e) {
    // What JSON cannot carry (invalid UTF-8, integers beyond 64 bits, deep nesting) is the
    // request's fault: the format's own error, not a failure of the renderer.
    refuse(std::string("Kimi K3 cannot write this value as JSON: ") + e.what());
  }
}

// Python's str() of a JSON value, as attribute values are written.
std::string python_str(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  return dumps(value, false);
}

// Python truthiness of a JSON value.
bool truthy(const json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_string() || value.is_array() || value.is_object()) return !value.empty();
  if (value.is_number_float()) return value.get<double>() != 0.0;
  return value.get<int64_t>() != 0;
}

const json& field(const json& object, const char* key) {
  static const json kNull = nullptr;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// Python's str.strip(), as the format's `|trim` is (Unicode whitespace, not only ASCII).
std::string trim(std::string_view text) {
  return jinja::uni::strip(text, nullptr, true, true);
}

// Attribute values escape & and " only; content is never escaped.
std::string escape_attribute(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else {
      out += c;
    }
  }
  return out;
}

class Writer {
 public:
  void text(const std::string& t) {
    if (t.empty()) return;
    if (!segments_.empty() && !segments_.back().markers) {
      segments_.back().text += t;
    } else {
      segments_.push_back({t, false});
    }
  }
  void marker(const char* m) { segments_.push_back({m, true}); }
  void open(const std::string& tag, const Attributes& attributes = {}) {
    marker("<|open|>");
    std::string head = tag;
    for (const auto& [key, value] : attributes)
      head += " " + key + "=\"" + escape_attribute(value) + "\"";
    text(head);
    marker("<|sep|>");
  }
  void close(const std::string& tag) {
    marker("<|close|>");
    text(tag);
    marker("<|sep|>");
  }
  void end_message() {
    close("message");
    marker("<|end_of_msg|>");
  }
  std::vector<ChatSegment> take() { return std::move(segments_); }

 private:
  std::vector<ChatSegment> segments_;
};

// Message content: a string, or parts whose text is joined (an image part becomes the image
// placeholder the processor replaces).
void content(Writer& w, const json& value) {
  if (value.is_string()) {
    w.text(value.get<std::string>());
  } else if (value.is_array()) {
    for (const json& part : value) {
      const json& type = field(part, "type");
      if (type == "image" || type == "image_url") {
        w.text("<|kimi_image_placeholder|>");
      } else {
        w.text(python_str(field(part, "text")));
      }
    }
  } else if (!value.is_null()) {
    w.text(python_str(value));
  }
}

void internal_system(Writer& w, const std::string& type, const std::string& body) {
  w.open("message", {{"role", "system"}, {"type", type}});
  w.text(trim(body));
  w.end_message();
}

void tool_declare(Writer& w, const json& tools, bool dynamic) {
  w.open("message", {{"role", "system"}, {"type", "tool-declare"}});
  w.text(dynamic ? "## New Tools Available\nThe system dynamically extends the toolset via "
                   "lazy-loading.\nYou have access to all existing and extended tools.\nHere are "
                   "the specs for the extended tools.\n\n```json\n"
                 : "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n");
  w.text(dumps(tools, true) + "\n```");
  w.end_message();
}

std::string argument_type(const json& value) {
  if (value.is_boolean()) return "boolean";
  if (value.is_null()) return "null";
  if (value.is_number()) return "number";
  if (value.is_string()) return "string";
  if (value.is_object()) return "object";
  return "array";
}

// A tool call's function: its `function` object, or the call itself.
const json& function_of(const json& call) {
  const json& function = field(call, "function");
  return function.is_object() ? function : call;
}

void json_block(Writer& w, const std::string& raw) {
  w.open("json", {{"type", "object"}});
  w.text(raw);
  w.close("json");
}

void tool_calls(Writer& w, const json& calls) {
  w.open("tools");
  int64_t index = 0;
  for (const json& call : calls) {
    if (!call.is_object()) refuse("Kimi K3 tool calls must be mappings.");
    const json& function = function_of(call);
    const json& name = field(function, "name");
    if (name.is_null()) refuse("Kimi K3 tool calls require a function name.");
    w.open("call", {{"tool", python_str(name)}, {"index", std::to_string(++index)}});
    const bool has_arguments = function.contains("arguments");
    const json& arguments = field(function, "arguments");
    if (const json& block = field(function, "_xtml_json_block"); !block.is_null()) {
      json_block(w, python_str(block));
    } else if (!has_arguments || arguments.is_object()) {
      static const json kNone = json::object();
      for (const auto& [key, value] : (has_arguments ? arguments : kNone).items()) {
        w.open("argument", {{"key", key}, {"type", argument_type(value)}});
        w.text(value.is_string() ? value.get<std::string>() : dumps(value, false));
        w.close("argument");
      }
    } else if (arguments.is_string()) {
      if (!trim(arguments.get<std::string>()).empty()) json_block(w, arguments.get<std::string>());
    } else if (!arguments.is_null()) {
      refuse("Kimi K3 tool call arguments must be a mapping or a JSON object string.");
    }
    w.close("call");
  }
  w.close("tools");
}

void assistant(Writer& w, const json& message, bool thinking) {
  if (thinking) {
    json reasoning = field(message, "reasoning_content");
    if (!truthy(reasoning)) reasoning = field(message, "reasoning");
    w.open("think");
    if (!reasoning.is_null() && !trim(python_str(reasoning)).empty()) w.text(python_str(reasoning));
    w.close("think");
  }
  w.open("response");
  content(w, field(message, "content"));
  w.close("response");
  if (const json& calls = field(message, "tool_calls"); truthy(calls)) tool_calls(w, calls);
}

// What the tool results of one turn refer to: the last assistant message's calls.
struct ToolTurn {
  const json* calls = nullptr;
  int64_t index = 0;
};

void tool_result(Writer& w, const json& message, ToolTurn& turn,
                 std::optional<std::string> resolved) {
  ++turn.index;
  json name = nullptr;
  if (resolved) {
    name = *resolved;
  } else if (message.contains("tool")) {
    name = message["tool"];
  } else {
    name = field(message, "name");
  }
  if (name.is_null() && turn.calls != nullptr && turn.calls->is_array() &&
      turn.index <= static_cast<int64_t>(turn.calls->size())) {
    name = field(function_of((*turn.calls)[static_cast<std::size_t>(turn.index - 1)]), "name");
  }
  if (name.is_null()) {
    refuse(
        "Kimi K3 tool messages need a resolvable tool name: carry `tool`/`name`, or match a "
        "preceding assistant tool_call by order.");
  }
  w.open("message",
         {{"role", "tool"}, {"tool", python_str(name)}, {"index", std::to_string(turn.index)}});
  content(w, field(message, "content"));
  w.end_message();
}

json call_id_of(const json& message) {
  const json& id = field(message, "tool_call_id");
  return message.contains("tool_call_id") ? id : field(message, "id");
}

// A run of consecutive tool results: in the order of the calls they answer when every one
// matches a call id of the turn, else as they came.
void tool_results(Writer& w, const std::vector<const json*>& run, ToolTurn& turn) {
  const auto matches = [&](const json& message) {
    const json id = call_id_of(message);
    if (id.is_null() || turn.calls == nullptr || !turn.calls->is_array()) return false;
    return std::any_of(turn.calls->begin(), turn.calls->end(), [&](const json& call) {
      return call.is_object() && !field(call, "id").is_null() &&
             python_str(field(call, "id")) == python_str(id);
    });
  };
  const bool all_match =
      std::all_of(run.begin(), run.end(), [&](const json* m) { return matches(*m); });
  if (!all_match) {
    for (const json* message : run) tool_result(w, *message, turn, std::nullopt);
    return;
  }
  std::vector<std::string> emitted;
  for (const json& call : *turn.calls) {
    if (!call.is_object() || field(call, "id").is_null()) continue;
    const std::string id = python_str(field(call, "id"));
    if (std::find(emitted.begin(), emitted.end(), id) != emitted.end()) continue;
    emitted.push_back(id);
    const json& name = field(function_of(call), "name");
    for (const json* message : run) {
      const json result_id = call_id_of(*message);
      if (!result_id.is_null() && python_str(result_id) == id) {
        tool_result(w, *message, turn,
                    name.is_null() ? std::nullopt : std::optional<std::string>(python_str(name)));
      }
    }
  }
}

Attributes with_name(Attributes attributes, const json& message) {
  if (const json& name = field(message, "name"); truthy(name)) {
    attributes.emplace_back("name", python_str(name));
  }
  return attributes;
}

void messages_of(Writer& w, const json& messages, bool thinking) {
  ToolTurn turn;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& message = messages[i];
    if (!message.is_object()) continue;
    if (!message.contains("role")) refuse("Kimi K3 messages require a role.");
    const json& role = message["role"];
    if (role == "user") {
      w.open("message", with_name({{"role", "user"}}, message));
      content(w, field(message, "content"));
      w.end_message();
    } else if (role == "system" && truthy(field(message, "tools"))) {
      tool_declare(w, message["tools"], true);
    } else if (role == "system") {
      w.open("message", with_name({{"role", "system"}}, message));
      content(w, field(message, "content"));
      w.end_message();
    } else if (role == "assistant") {
      turn = {&field(message, "tool_calls"), 0};
      if (turn.calls->is_null()) turn.calls = nullptr;
      w.open("message", with_name({{"role", "assistant"}}, message));
      assistant(w, message, thinking);
      w.end_message();
    } else if (role == "tool" && (i == 0 || field(messages[i - 1], "role") != "tool")) {
      std::vector<const json*> run;
      for (std::size_t j = i; j < messages.size() && field(messages[j], "role") == "tool"; ++j) {
        run.push_back(&messages[j]);
      }
      tool_results(w, run, turn);
    }
  }
}

// thinking and its effort from the switches (§ the chat switches of KimiXtmlOptions).
std::pair<bool, json> thinking_switches(const json& variables) {
  bool thinking = true;
  json effort = "max";
  for (const char* key : {"enable_thinking", "thinking"}) {
    if (const json& v = field(variables, key); !v.is_null()) thinking = truthy(v);
  }
  for (const char* key : {"reasoning_effort", "thinking_effort"}) {
    if (!variables.contains(key)) continue;
    const json& v = variables[key];
    if (v == "none") {
      thinking = false;
    } else {
      effort = v;
    }
  }
  if (thinking && !effort.is_null() && effort != "low" && effort != "high" && effort != "max") {
    refuse("Unsupported thinking_effort=" + python_str(effort) +
           "; supported values are low, high, and max.");
  }
  return {thinking, effort};
}

const json* response_schema(const json& variables) {
  if (variables.contains("response_schema")) return &variables["response_schema"];
  const json& wrapper = field(field(variables, "response_format"), "json_schema");
  if (wrapper.is_null()) return nullptr;
  if (wrapper.is_object() && wrapper.contains("schema")) return &wrapper["schema"];
  if (wrapper.is_object() && wrapper.contains("json_schema")) return &wrapper["json_schema"];
  return &wrapper;
}

void closing_system_messages(Writer& w, const json& variables) {
  const json& choice = field(variables, "tool_choice");
  if (choice == "required") {
    internal_system(w, "tool-choice",
                    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in "
                    "the next message.");
  } else if (choice == "none") {
    internal_system(w, "tool-choice",
                    "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools "
                    "in the next message.");
  }
  const json& format = field(variables, "response_format");
  const json& type = format.is_object() ? field(format, "type") : format;
  const std::string raw_json =
      "Your response must be raw JSON data without markdown code blocks (```json) or any "
      "additional formatting.";
  if (type == "json_object") {
    internal_system(w, "response-format",
                    "The system is invoked with `response_format=json_object`.\n" + raw_json);
  } else if (type == "json_schema") {
    const json* schema = response_schema(variables);
    internal_system(w, "response-format",
                    "The system is invoked with `response_format=json_schema`.\n" + raw_json +
                        "\nThe JSON data must match the following schema:\n```json\n" +
                        dumps(schema != nullptr ? *schema : json(nullptr), true) + "\n```");
  }
}

}  // namespace

std::vector<ChatSegment> render_kimi_xtml(const json& messages, const KimiXtmlOptions& options) {
  const auto [thinking, effort] = thinking_switches(options.variables);
  Writer w;
  if (truthy(options.tools)) tool_declare(w, options.tools, false);
  if (thinking && (effort == "low" || effort == "high" || effort == "max")) {
    internal_system(w, "thinking-effort",
                    "`thinking_effort` guides on how much to think in your thinking channel (not "
                    "including the response channel), supported values include `low`, `medium`, "
                    "`high`, and `max`.\nNow the system is invoked with `thinking_effort=" +
                        effort.get<std::string>() + "`.");
  }
  if (messages.is_array()) messages_of(w, messages, thinking);
  closing_system_messages(w, options.variables);
  if (options.add_generation_prompt) {
    w.open("message", {{"role", "assistant"}});
    w.open(thinking ? "think" : "response");
  }
  return w.take();
}

std::string join_segments(const std::vector<ChatSegment>& segments) {
  std::string out;
  for (const ChatSegment& s : segments) out += s.text;
  return out;
}

}  // namespace md
