#include "server/generation_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/request_fields.h"
#include "text/grammar/json_schema_grammar.h"

namespace md::server {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Rule texts and bounds of §2.2 and §2.3.
constexpr NumberRule kPenaltyRule{-2, 2, "a number between -2 and 2"};
constexpr NumberRule kRepetitionRule{0, 2, "a number greater than 0 and at most 2",
                                     /*min_exclusive=*/true};
constexpr NumberRule kTemperatureRule{0, 2, "a number between 0 and 2"};
constexpr NumberRule kUnitRule{0, 1, "a number between 0 and 1"};
constexpr NumberRule kLogitBiasRule{-100, 100, "a number between -100 and 100"};
constexpr IntegerRule kTopKRule{-1, kInt64Max, "an integer >= -1"};
constexpr IntegerRule kMaxTokensRule{0, std::numeric_limits<int32_t>::max(),
                                     "an integer between 0 and 2147483647"};
constexpr IntegerRule kMinTokensRule{0, kInt64Max, "an integer >= 0"};
constexpr IntegerRule kNRule{1, 128, "an integer between 1 and 128"};
constexpr IntegerRule kSeedRule{kInt64Min, kInt64Max,
                                "an integer between -9223372036854775808 and 9223372036854775807"};
constexpr IntegerRule kLogprobsRule{0, 20, "an integer between 0 and 20"};
constexpr IntegerRule kBestOfRule{kInt64Min, kInt64Max, "null or equal to 'n'"};

constexpr std::size_t kMaxStops = 16;
constexpr std::size_t kMaxStopBytes = 1024;
constexpr std::string_view kStopRule = "at most 16 stop strings of at most 1024 bytes each";
constexpr std::size_t kMaxLogitBias = 1024;
constexpr std::size_t kMaxTools = 128;
constexpr std::size_t kMaxToolNameLength = 64;

constexpr std::string_view kStopPhrase = "a string or an array of strings";
constexpr std::string_view kStringOrObjectPhrase = "a string or an object";
constexpr std::string_view kContentPhrase = "a string or an array of content parts";
constexpr std::string_view kPromptPhrase =
    "a string, an array of strings, an array of token ids or an array of arrays of token ids";

// "messages[2]" + "." + "content": JSON paths of nested values.
std::string indexed(std::string_view path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}
std::string member(std::string_view path, std::string_view key) {
  return fmt::format("{}.{}", path, key);
}

template <std::size_t N>
bool is_one_of(std::string_view value, const std::array<std::string_view, N>& choices) {
  return std::find(choices.begin(), choices.end(), value) != choices.end();
}

// ---- Token ids ----

// A token id in [0, vocab); `rule` is the <rule> text of the out-of-range message.
int32_t as_token_id(const Json& value, std::string_view param, const RequestLimits& limits,
                    std::string_view rule) {
  return static_cast<int32_t>(
      as_integer(value, param, IntegerRule{0, limits.vocab_size - 1, rule}));
}

std::string token_id_rule(const RequestLimits& limits) {
  return fmt::format("a token id in [0, {})", limits.vocab_size);
}

// ---- Fields shared by chat and completions ----

void read_sampling_fields(const FieldReader& r, CommonFields& out) {
  out.frequency_penalty = r.number("frequency_penalty", kPenaltyRule);
  out.presence_penalty = r.number("presence_penalty", kPenaltyRule);
  out.repetition_penalty = r.number("repetition_penalty", kRepetitionRule);
  out.temperature = r.number("temperature", kTemperatureRule);
  out.top_p = r.number("top_p", kUnitRule);
  out.top_k = r.integer("top_k", kTopKRule);
  out.min_p = r.number("min_p", kUnitRule);
}

void read_length_fields(const FieldReader& r, CommonFields& out) {
  const std::optional<int64_t> max_completion_tokens =
      r.integer("max_completion_tokens", kMaxTokensRule);
  const std::optional<int64_t> max_tokens = r.integer("max_tokens", kMaxTokensRule);
  out.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  out.min_tokens = r.integer("min_tokens", kMinTokensRule).value_or(0);
  out.n = r.integer("n", kNRule).value_or(1);
}

std::vector<std::string> parse_stop(const Json& value) {
  std::vector<std::string> stops;
  auto add = [&stops](const std::string& stop, std::string_view param) {
    if (stop.size() > kMaxStopBytes) throw invalid_value(param, kStopRule);
    if (!stop.empty()) stops.push_back(stop);  // an empty stop string would match everywhere
  };
  if (value.is_string()) {
    add(value.get_ref<const std::string&>(), "stop");
    return stops;
  }
  if (!value.is_array()) throw invalid_type("stop", kStopPhrase);
  if (value.size() > kMaxStops) throw invalid_value("stop", kStopRule);
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string param = indexed("stop", i);
    add(as_string(value[i], param), param);
  }
  return stops;
}

std::vector<int32_t> parse_stop_token_ids(const Json& value, const RequestLimits& limits) {
  const std::string rule = fmt::format("token ids in [0, {})", limits.vocab_size);
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i < value.size(); ++i) {
    ids.push_back(as_token_id(value[i], indexed("stop_token_ids", i), limits, rule));
  }
  return ids;
}

void read_stop_fields(const FieldReader& r, const RequestLimits& limits, CommonFields& out) {
  if (const Json* stop = r.find("stop")) out.stop = parse_stop(*stop);
  if (const Json* ids = r.array("stop_token_ids")) {
    out.stop_token_ids = parse_stop_token_ids(*ids, limits);
  }
  out.include_stop_str_in_output = r.boolean("include_stop_str_in_output").value_or(false);
  out.ignore_eos = r.boolean("ignore_eos").value_or(false);
  out.skip_special_tokens = r.boolean("skip_special_tokens").value_or(true);
}

void read_stream_fields(const FieldReader& r, CommonFields& out) {
  out.stream = r.boolean("stream").value_or(false);
  bool include_usage = false;
  if (const Json* options = r.object("stream_options")) {
    // include_obfuscation and unknown keys are ignored.
    include_usage =
        FieldReader(*options, "stream_options.").boolean("include_usage").value_or(false);
  }
  // Ignored when not streaming: usage is always in a non-streaming response.
  out.include_usage = out.stream && include_usage;
}

// Rows 3–21 of §2.2, which chat and completions share in this order.
void read_common_fields(const FieldReader& r, const RequestLimits& limits, CommonFields& out) {
  read_sampling_fields(r, out);
  read_length_fields(r, out);
  read_stop_fields(r, limits, out);
  read_stream_fields(r, out);
  out.seed = r.integer("seed", kSeedRule);
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& object,
                                                        const RequestLimits& limits) {
  if (object.size() > kMaxLogitBias) {
    throw invalid_value("logit_bias", fmt::format("at most {} entries", kMaxLogitBias));
  }
  const std::string key_rule = token_id_rule(limits);
  std::vector<std::pair<int32_t, float>> biases;
  std::map<int32_t, std::size_t> position;  // "5" and "05" name one token: the later value wins
  for (const auto& [key, value] : object.items()) {
    const std::string param = member("logit_bias", key);
    const std::optional<int64_t> id = parse_decimal(key);
    if (!id || *id < 0 || *id >= limits.vocab_size) throw invalid_value(param, key_rule);
    const auto bias = static_cast<float>(as_number(value, param, kLogitBiasRule));
    const auto token = static_cast<int32_t>(*id);
    const auto [it, inserted] = position.emplace(token, biases.size());
    if (inserted) {
      biases.emplace_back(token, bias);
    } else {
      biases[it->second].second = bias;
    }
  }
  return biases;
}

void read_logit_bias(const FieldReader& r, const RequestLimits& limits, CommonFields& out) {
  if (const Json* object = r.object("logit_bias")) {
    out.logit_bias = parse_logit_bias(*object, limits);
  }
}

// ---- Cross-field rules shared by both generation routes (§2.2, in their order) ----

void check_min_tokens(const CommonFields& fields) {
  // The default max is decided by the server after tokenization; only an explicit one is known.
  if (fields.max_tokens && fields.min_tokens > *fields.max_tokens) {
    throw invalid_value_message("min_tokens", "'min_tokens' must not exceed 'max_tokens'.");
  }
}

void check_prompt_logprobs(const CommonFields& fields) {
  if (fields.prompt_logprobs && fields.stream) {
    throw invalid_value_message("prompt_logprobs",
                                "'prompt_logprobs' cannot be used with 'stream'.");
  }
}

void check_choices(int64_t n, std::size_t prompt_count, const RequestLimits& limits) {
  // n <= 128 and the prompt count is bounded by the body size, so this cannot overflow.
  const int64_t choices = n * static_cast<int64_t>(prompt_count);
  if (choices > limits.max_choices) {
    throw invalid_value_message(
        "n", fmt::format("Request asks for {} choices; at most {} are allowed.", choices,
                         limits.max_choices));
  }
}

// ---- Messages (§2.4) ----

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};

std::string parse_content_parts(const Json& parts, const std::string& path) {
  std::string text;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const std::string part_path = indexed(path, j);
    const FieldReader part(as_object(parts[j], part_path), part_path + ".");
    const Json& type = part.required("type");
    if (as_string(type, part.path("type")) != "text") {
      throw unsupported_value(part.path("type"), type);
    }
    text += as_string(part.required("text"), part.path("text"));
  }
  return text;  // parts are joined with no separator
}

Json parse_content(const FieldReader& message, bool null_allowed) {
  const std::string path = message.path("content");
  const Json* content = message.find("content");
  if (content == nullptr) {
    // An assistant turn that only calls tools (LangChain's tool loop sends "content": null)
    // reaches the template as "", as vLLM passes it: templates written for strings concatenate
    // it (SmolLM2's fails on none), and those that test it treat "" as they treat none.
    if (null_allowed) return "";
    throw missing_required(path);
  }
  if (content->is_string()) return *content;
  if (content->is_array()) return parse_content_parts(*content, path);
  throw invalid_type(path, kContentPhrase);
}

// Arguments of a tool call in history, as an object: templates that iterate over them (the
// Qwen3.8 XML template) need one, and a JSON string is parsed into one.
Json parse_tool_call_arguments(const Json& value, const std::string& path) {
  constexpr std::string_view kRule = "a JSON object or a string holding one";
  if (value.is_object()) return value;
  if (!value.is_string()) throw invalid_type(path, kStringOrObjectPhrase);
  std::optional<Json> parsed = parse_embedded_json(value.get_ref<const std::string&>());
  if (!parsed || !parsed->is_object()) throw invalid_value(path, kRule);
  return std::move(*parsed);
}

Json parse_tool_call(const Json& value, const std::string& path) {
  const FieldReader call(as_object(value, path), path + ".");
  Json out = Json::object();
  if (std::optional<std::string> id = call.string("id")) out["id"] = std::move(*id);
  // `type` may be omitted in history; when given it must be the only type there is.
  if (const Json* type = call.find("type");
      type && as_string(*type, call.path("type")) != "function") {
    throw unsupported_value(call.path("type"), *type);
  }
  out["type"] = "function";
  const std::string function_path = call.path("function");
  const FieldReader function(as_object(call.required("function"), function_path),
                             function_path + ".");
  Json normalized_function = Json::object();
  normalized_function["name"] = as_string(function.required("name"), function.path("name"));
  normalized_function["arguments"] =
      parse_tool_call_arguments(function.required("arguments"), function.path("arguments"));
  out["function"] = std::move(normalized_function);
  return out;
}

void add_assistant_extras(const FieldReader& message, Json& out) {
  if (const Json* calls = message.array("tool_calls"); calls && !calls->empty()) {
    Json normalized = Json::array();
    for (std::size_t j = 0; j < calls->size(); ++j) {
      normalized.push_back(parse_tool_call((*calls)[j], indexed(message.path("tool_calls"), j)));
    }
    out["tool_calls"] = std::move(normalized);
  }
  std::optional<std::string> reasoning_content = message.string("reasoning_content");
  std::optional<std::string> reasoning = message.string("reasoning");
  if (!reasoning_content) reasoning_content = std::move(reasoning);  // alias, lower precedence
  if (reasoning_content) out["reasoning_content"] = std::move(*reasoning_content);
}

void add_tool_extras(const FieldReader& message, Json& out) {
  if (std::optional<std::string> id = message.string("tool_call_id")) {
    out["tool_call_id"] = std::move(*id);
  }
  if (std::optional<std::string> name = message.string("name")) out["name"] = std::move(*name);
}

Json parse_message(const Json& value, const std::string& path) {
  const FieldReader message(as_object(value, path), path + ".");
  const std::string& role = as_string(message.required("role"), message.path("role"));
  if (!is_one_of(role, kRoles)) {
    throw invalid_choice(message.path("role"),
                         std::vector<std::string>(kRoles.begin(), kRoles.end()));
  }
  Json out = Json::object();
  out["role"] = role == "developer" ? "system" : role;
  out["content"] = parse_content(message, /*null_allowed=*/role == "assistant");
  if (role == "assistant") add_assistant_extras(message, out);
  if (role == "tool") add_tool_extras(message, out);
  return out;
}

Json parse_messages(const Json& value, const RequestLimits& limits) {
  const Json& messages = as_array(value, "messages");
  if (messages.empty()) throw invalid_value("messages", "a non-empty array of messages");
  if (messages.size() > limits.max_messages) {
    throw invalid_value("messages", fmt::format("at most {} messages", limits.max_messages));
  }
  Json out = Json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    out.push_back(parse_message(messages[i], indexed("messages", i)));
  }
  return out;
}

// ---- Tools and tool_choice (§12.1) ----

bool is_valid_tool_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// Checks one tool and returns its function name.
std::string check_tool(const Json& value, const std::string& path) {
  const FieldReader tool(as_object(value, path), path + ".");
  const Json& type = tool.required("type");
  if (as_string(type, tool.path("type")) != "function") {
    throw unsupported_value(tool.path("type"), type);
  }
  const std::string function_path = tool.path("function");
  const FieldReader function(as_object(tool.required("function"), function_path),
                             function_path + ".");
  const std::string& name = as_string(function.required("name"), function.path("name"));
  if (!is_valid_tool_name(name)) {
    throw invalid_value(function.path("name"),
                        "1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'");
  }
  // Type checks only: the tool goes to the template as received. `strict` is ignored.
  function.string("description");
  function.object("parameters");
  return name;
}

struct Tools {
  Json list = nullptr;  // null when absent or empty
  std::set<std::string> names;
};

Tools parse_tools(const FieldReader& r) {
  const Json* tools = r.array("tools");
  if (tools == nullptr) return {};
  if (tools->size() > kMaxTools) {
    throw invalid_value("tools", fmt::format("at most {} tools", kMaxTools));
  }
  Tools out;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    names.push_back(check_tool((*tools)[i], indexed("tools", i)));
  }
  out.names.insert(names.begin(), names.end());
  if (out.names.size() != names.size()) throw invalid_value("tools", "unique function names");
  if (!tools->empty()) out.list = *tools;  // an empty list is the same as no tools
  return out;
}

struct ToolChoice {
  ToolChoiceKind kind;
  std::string name;
};

ToolChoice parse_named_tool_choice(const Json& object) {
  const FieldReader choice(object, "tool_choice.");
  const Json& type = choice.required("type");
  if (as_string(type, choice.path("type")) != "function") {
    throw unsupported_value(choice.path("type"), type);
  }
  const FieldReader function(as_object(choice.required("function"), choice.path("function")),
                             "tool_choice.function.");
  return {ToolChoiceKind::kNamed, as_string(function.required("name"), function.path("name"))};
}

std::optional<ToolChoice> parse_tool_choice(const FieldReader& r) {
  const Json* value = r.find("tool_choice");
  if (value == nullptr) return std::nullopt;
  if (value->is_object()) return parse_named_tool_choice(*value);
  if (!value->is_string()) throw invalid_type("tool_choice", kStringOrObjectPhrase);
  const auto& text = value->get_ref<const std::string&>();
  if (text == "none") return ToolChoice{ToolChoiceKind::kNone, ""};
  if (text == "auto") return ToolChoice{ToolChoiceKind::kAuto, ""};
  if (text == "required") return ToolChoice{ToolChoiceKind::kRequired, ""};
  throw invalid_choice("tool_choice", {"none", "auto", "required"});
}

// Cross-field rules 3 and 4, then the default (auto with tools, else none).
ToolChoice resolve_tool_choice(const std::optional<ToolChoice>& choice, const Tools& tools) {
  if (!choice) return {tools.list.is_null() ? ToolChoiceKind::kNone : ToolChoiceKind::kAuto, ""};
  if (choice->kind != ToolChoiceKind::kNone && tools.list.is_null()) {
    throw invalid_value_message("tool_choice", "'tool_choice' requires 'tools'.");
  }
  if (choice->kind == ToolChoiceKind::kNamed && !tools.names.contains(choice->name)) {
    throw invalid_value_message(
        "tool_choice",
        fmt::format("'tool_choice' names function '{}', which is not in 'tools'.", choice->name));
  }
  return *choice;
}

// ---- Reasoning switches (§11) ----

constexpr std::array<std::string_view, 7> kEfforts = {"none", "minimal", "low", "medium",
                                                      "high", "xhigh",   "max"};

std::optional<std::string> read_reasoning_effort(const FieldReader& r) {
  std::optional<std::string> effort = r.string("reasoning_effort");
  if (effort && !is_one_of(*effort, kEfforts)) {
    throw invalid_choice("reasoning_effort",
                         std::vector<std::string>(kEfforts.begin(), kEfforts.end()));
  }
  return effort;
}

// chat_template_kwargs with null values dropped and the keys the server knows validated; the
// other keys go to the template untouched.
Json read_template_kwargs(const FieldReader& r, const RequestLimits& limits) {
  Json out = Json::object();
  const Json* kwargs = r.object("chat_template_kwargs");
  if (kwargs == nullptr) return out;
  const FieldReader reader(*kwargs, "chat_template_kwargs.");
  reader.boolean("enable_thinking");
  reader.boolean("preserve_thinking");
  if (limits.reasoning_effort_values) {
    const std::vector<std::string>& allowed = *limits.reasoning_effort_values;
    if (std::optional<std::string> effort = reader.string("reasoning_effort");
        effort && std::find(allowed.begin(), allowed.end(), *effort) == allowed.end()) {
      throw invalid_choice(reader.path("reasoning_effort"), allowed);
    }
  }
  for (const auto& [key, value] : kwargs->items()) {
    if (!value.is_null()) out[key] = value;
  }
  return out;
}

// The template's reasoning_effort for a top-level effort other than none.
std::string_view template_effort(std::string_view effort) {
  if (effort == "minimal" || effort == "low") return "low";
  if (effort == "medium") return "medium";
  return "xhigh";  // high, xhigh, max
}

// Top-level enable_thinking, then top-level reasoning_effort, each only where the kwargs (or the
// switch before it) left the key unset.
void apply_thinking_switches(Json& kwargs, std::optional<bool> enable_thinking,
                             const std::optional<std::string>& effort,
                             const RequestLimits& limits) {
  if (enable_thinking && !kwargs.contains("enable_thinking")) {
    kwargs["enable_thinking"] = *enable_thinking;
  }
  if (!effort) return;
  if (*effort == "none") {
    if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
    return;
  }
  // Templates without an effort variable (Qwen3): only none has an effect.
  if (!limits.reasoning_effort_values || kwargs.contains("reasoning_effort")) return;
  const std::vector<std::string>& allowed = *limits.reasoning_effort_values;
  // A value the template takes goes as it is (Muse: minimal .. xhigh); others map onto the
  // Qwen3.8 set, and a template whose set lacks the target keeps its default rather than being
  // handed a value it would raise on.
  if (std::find(allowed.begin(), allowed.end(), *effort) != allowed.end()) {
    kwargs["reasoning_effort"] = *effort;
    return;
  }
  const std::string_view mapped = template_effort(*effort);
  if (std::find(allowed.begin(), allowed.end(), mapped) != allowed.end()) {
    kwargs["reasoning_effort"] = std::string(mapped);
  }
}

// ---- Chat-only fields ----

void read_chat_logprobs(const FieldReader& r, ChatRequest& out) {
  out.logprobs = r.boolean("logprobs").value_or(false);
  out.top_logprobs = r.integer("top_logprobs", kLogprobsRule).value_or(0);
}

// Structured output (§15): response_format (json_object, json_schema) or the `grammar` extension
// (GBNF), exclusive. A schema is compiled to GBNF here, so its refusals are 400s naming the
// keyword.
void read_structured_output(const FieldReader& r, CommonFields& out) {
  if (const Json* grammar = r.find("grammar")) {
    out.grammar = as_string(*grammar, "grammar");
    out.grammar_param = "grammar";
  }
  const Json* format = r.object("response_format");
  if (format == nullptr) return;
  const FieldReader reader(*format, "response_format.");
  const Json& type = reader.required("type");
  const std::string& text = as_string(type, reader.path("type"));
  if (text == "text") return;
  if (text != "json_object" && text != "json_schema") {
    throw invalid_choice(reader.path("type"), {"text", "json_object", "json_schema"});
  }
  if (out.grammar) {
    throw invalid_value_message("grammar",
                                "'grammar' and a JSON 'response_format' cannot be used together.");
  }
  if (text == "json_object") {
    out.grammar = grammar::json_object_gbnf();
    out.grammar_param = reader.path("type");
    return;
  }
  const Json* spec = reader.object("json_schema");
  if (spec == nullptr) throw missing_required(reader.path("json_schema"));
  const FieldReader schema_reader(*spec, "response_format.json_schema.");
  schema_reader.string("name");
  schema_reader.boolean("strict");
  out.grammar_param = schema_reader.path("schema");
  const Json* schema = schema_reader.find("schema");
  if (schema == nullptr) {
    out.grammar = grammar::json_object_gbnf();  // no schema: any JSON object, as OpenAI
    return;
  }
  if (!schema->is_object() && !schema->is_boolean()) {
    throw invalid_type(out.grammar_param, "an object");
  }
  try {
    out.grammar = grammar::json_schema_to_gbnf(*schema);
  } catch (const grammar::JsonSchemaError& e) {
    throw invalid_value_message(out.grammar_param, e.what());
  }
}

// OpenAI fields this server does not offer (§2.2), checked after the table's fields.
void check_unsupported_chat_fields(const FieldReader& r) {
  for (std::string_view key :
       {"functions", "function_call", "audio", "prediction", "web_search_options"}) {
    if (r.has(key)) throw unsupported_parameter(key);
  }
  if (const Json* modalities = r.find("modalities")) {
    if (*modalities != Json::array({"text"})) throw unsupported_value("modalities", *modalities);
  }
}

// Tools are handed on only when they will be rendered and parsed (not with tool_choice none).
void set_tool_fields(const Tools& tools, const ToolChoice& choice, ChatPromptFields& out) {
  out.tool_choice = choice.kind;
  out.tool_choice_name = choice.name;
  if (choice.kind != ToolChoiceKind::kNone) out.tools = tools.list;
}

void check_add_generation_prompt(const ChatPromptFields& fields) {
  if (fields.add_generation_prompt && fields.continue_final_message) {
    throw invalid_value_message(
        "continue_final_message",
        "'add_generation_prompt' and 'continue_final_message' cannot both be true.");
  }
}

// ---- Completions-only fields (§2.3) ----

std::vector<int32_t> parse_token_ids(const Json& ids, const std::string& path,
                                     const RequestLimits& limits) {
  const std::string rule = token_id_rule(limits);
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    out.push_back(as_token_id(ids[i], indexed(path, i), limits, rule));
  }
  return out;
}

std::vector<PromptInput> parse_prompt_strings(const Json& prompt) {
  std::vector<PromptInput> prompts;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    prompts.push_back({as_string(prompt[i], indexed("prompt", i)), {}});
  }
  return prompts;
}

std::vector<PromptInput> parse_prompt_id_lists(const Json& prompt, const RequestLimits& limits) {
  std::vector<PromptInput> prompts;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const std::string path = indexed("prompt", i);
    const Json& ids = as_array(prompt[i], path);
    if (ids.empty()) throw invalid_value(path, "a non-empty array of token ids");
    prompts.push_back({std::nullopt, parse_token_ids(ids, path, limits)});
  }
  return prompts;
}

// string | string[] | int[] | int[][]; an array's form is set by its first element.
std::vector<PromptInput> parse_prompt(const Json& prompt, const RequestLimits& limits) {
  if (prompt.is_string()) return {{prompt.get<std::string>(), {}}};
  if (!prompt.is_array()) throw invalid_type("prompt", kPromptPhrase);
  if (prompt.empty()) throw invalid_value("prompt", "a non-empty array");
  const Json& first = prompt.front();
  if (first.is_string()) return parse_prompt_strings(prompt);
  if (first.is_array()) return parse_prompt_id_lists(prompt, limits);
  if (first.is_number()) return {{std::nullopt, parse_token_ids(prompt, "prompt", limits)}};
  throw invalid_type("prompt", kPromptPhrase);
}

std::optional<int64_t> read_completion_logprobs(const FieldReader& r) {
  const Json* value = r.find("logprobs");
  if (value == nullptr) return std::nullopt;
  // The one place a boolean stands for a number (§0): true means 1, false means absent.
  if (value->is_boolean()) return value->get<bool>() ? std::optional<int64_t>(1) : std::nullopt;
  if (read_integer(*value).status == IntegerStatus::kNotInteger) {
    throw invalid_type("logprobs", "an integer or a boolean");
  }
  return as_integer(*value, "logprobs", kLogprobsRule);
}

void check_best_of(const FieldReader& r, int64_t n) {
  const std::optional<int64_t> best_of = r.integer("best_of", kBestOfRule);
  if (best_of && *best_of != n) throw invalid_value("best_of", kBestOfRule.text);
}

void check_suffix(const FieldReader& r) {
  const std::optional<std::string> suffix = r.string("suffix");
  if (suffix && !suffix->empty()) throw unsupported_parameter("suffix");
}

// ---- /detokenize ----

int32_t parse_detokenize_id(const Json& value, std::size_t index, const RequestLimits& limits) {
  const std::string param = indexed("tokens", index);
  const IntegerRead read = read_integer(value);
  if (read.status == IntegerStatus::kNotInteger) throw invalid_type(param, type_phrase::kInteger);
  if (read.status == IntegerStatus::kOk && read.value >= 0 && read.value < limits.vocab_size) {
    return static_cast<int32_t>(read.value);
  }
  // An id beyond int64 (1e30) has no int64 value: show it as written.
  const std::string id =
      read.status == IntegerStatus::kOk ? std::to_string(read.value) : value.dump();
  throw invalid_value_message(
      param, fmt::format("Invalid value for '{}': token id {} is outside [0, {}).", param, id,
                         limits.vocab_size));
}

}  // namespace

std::string resolve_model(const std::optional<std::string>& name, const RequestLimits& limits) {
  const std::vector<std::string>& names = limits.model_names;
  if (!name) return names.empty() ? std::string() : names.front();
  if (std::find(names.begin(), names.end(), *name) == names.end()) throw model_not_found(*name);
  return names.front();
}

ChatRequest parse_chat_request(const Json& body, const RequestLimits& limits) {
  const FieldReader r(body);
  ChatRequest out;
  // Step 7: the fields, in the order of the §2.2 table.
  const std::optional<std::string> model = r.string("model");
  out.messages = parse_messages(r.required("messages"), limits);
  read_common_fields(r, limits, out);
  read_chat_logprobs(r, out);
  read_logit_bias(r, limits, out);
  const Tools tools = parse_tools(r);
  const std::optional<ToolChoice> tool_choice = parse_tool_choice(r);
  out.parallel_tool_calls = r.boolean("parallel_tool_calls").value_or(true);
  read_structured_output(r, out);
  if (out.grammar && out.grammar_param != "grammar")
    out.response_format = *r.object("response_format");
  const std::optional<std::string> effort = read_reasoning_effort(r);
  out.chat_template_kwargs = read_template_kwargs(r, limits);
  const std::optional<bool> enable_thinking = r.boolean("enable_thinking");
  out.add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
  out.continue_final_message = r.boolean("continue_final_message").value_or(false);
  out.return_token_ids = r.boolean("return_token_ids").value_or(false);
  out.prompt_logprobs = r.integer("prompt_logprobs", kLogprobsRule);
  check_unsupported_chat_fields(r);

  // Step 8: the cross-field rules, in their listed order.
  if (out.top_logprobs > 0 && !out.logprobs) {
    throw invalid_value_message("top_logprobs", "'top_logprobs' requires 'logprobs' to be true.");
  }
  check_min_tokens(out);
  const ToolChoice choice = resolve_tool_choice(tool_choice, tools);
  check_add_generation_prompt(out);
  check_prompt_logprobs(out);
  check_choices(out.n, 1, limits);

  // Step 9: the model name; then what needs no more checks.
  out.model = resolve_model(model, limits);
  set_tool_fields(tools, choice, out);
  apply_thinking_switches(out.chat_template_kwargs, enable_thinking, effort, limits);
  return out;
}

CompletionRequest parse_completion_request(const Json& body, const RequestLimits& limits) {
  const FieldReader r(body);
  CompletionRequest out;
  const std::optional<std::string> model = r.string("model");
  out.prompts = parse_prompt(r.required("prompt"), limits);
  read_common_fields(r, limits, out);
  out.echo = r.boolean("echo").value_or(false);
  out.logprobs = read_completion_logprobs(r);
  read_logit_bias(r, limits, out);
  out.return_token_ids = r.boolean("return_token_ids").value_or(false);
  out.prompt_logprobs = r.integer("prompt_logprobs", kLogprobsRule);
  read_structured_output(r, out);
  check_best_of(r, out.n);
  check_suffix(r);
  out.add_special_tokens = r.boolean("add_special_tokens").value_or(true);

  check_min_tokens(out);
  check_prompt_logprobs(out);
  check_choices(out.n, out.prompts.size(), limits);

  out.model = resolve_model(model, limits);
  return out;
}

TokenizeRequest parse_tokenize_request(const Json& body, const RequestLimits& limits) {
  const FieldReader r(body);
  TokenizeRequest out;
  const std::optional<std::string> model = r.string("model");
  const bool has_prompt = r.has("prompt") || r.has("content");
  const bool has_messages = r.has("messages");
  if (!has_prompt && !has_messages) throw missing_required("prompt");
  if (has_prompt && has_messages) {
    throw invalid_value_message("messages", "Provide either 'prompt' or 'messages', not both.");
  }
  if (has_prompt) {
    const std::optional<std::string> prompt = r.string("prompt");
    const std::optional<std::string> content = r.string("content");  // alias of prompt
    out.prompt = prompt ? prompt : content;
    out.add_special_tokens = r.boolean("add_special_tokens").value_or(true);
    out.return_token_strs = r.boolean("return_token_strs").value_or(false);
    out.model = resolve_model(model, limits);
    return out;
  }
  out.messages = parse_messages(r.required("messages"), limits);
  out.add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
  out.continue_final_message = r.boolean("continue_final_message").value_or(false);
  out.add_special_tokens = r.boolean("add_special_tokens").value_or(false);
  const Tools tools = parse_tools(r);
  const std::optional<ToolChoice> tool_choice = parse_tool_choice(r);
  out.chat_template_kwargs = read_template_kwargs(r, limits);
  const std::optional<std::string> effort = read_reasoning_effort(r);
  const std::optional<bool> enable_thinking = r.boolean("enable_thinking");
  out.return_token_strs = r.boolean("return_token_strs").value_or(false);

  const ToolChoice choice = resolve_tool_choice(tool_choice, tools);
  check_add_generation_prompt(out);

  out.model = resolve_model(model, limits);
  set_tool_fields(tools, choice, out);
  apply_thinking_switches(out.chat_template_kwargs, enable_thinking, effort, limits);
  return out;
}

DetokenizeRequest parse_detokenize_request(const Json& body, const RequestLimits& limits) {
  const FieldReader r(body);
  DetokenizeRequest out;
  const std::optional<std::string> model = r.string("model");
  const Json& tokens = as_array(r.required("tokens"), "tokens");
  out.tokens.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    out.tokens.push_back(parse_detokenize_id(tokens[i], i, limits));
  }
  out.model = resolve_model(model, limits);
  return out;
}

}  // namespace md::server
