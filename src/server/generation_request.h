// The request bodies of the generation and tokenizer routes (docs/openai-api.md §1.3, §1.4, §2,
// §11, §12.1) as typed structs, and the pure functions that validate a parsed body into them.
// Each parser checks the fields in the order of the spec's tables, then the cross-field rules in
// their listed order, then the model name (§2.1 steps 7–9), and throws the first ApiError found.
// Unknown fields are ignored everywhere. What needs the tokenizer, the template or the engine
// (empty prompts, context length, defaults for max_tokens) is decided later, by the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace md::server {

// What the parsers need to know about the served model and the server's flags.
struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t max_choices = 64;  // --max-choices: n × number of prompts
  // --served-model-name: the served id first, then its aliases. The `model` field must name one
  // of them; an omitted `model` means the first.
  std::vector<std::string> model_names;
  // Set when the chat template takes chat_template_kwargs.reasoning_effort from a fixed set (e.g.
  // {"low", "medium", "xhigh"} for Qwen3.8): the server validates it, because the template
  // raises on anything else, and maps the top-level reasoning_effort onto it (§11).
  std::optional<std::vector<std::string>> reasoning_effort_values;
  std::size_t max_messages = 4096;
};

// Fields shared by chat and completions (§2.2 rows 3–21, 24, 34, 35). Optional sampling fields
// stay unset when absent so that the server's defaults apply.
struct CommonFields {
  std::string model;  // the resolved served id, never an alias
  std::optional<double> temperature, top_p, min_p, frequency_penalty, presence_penalty,
      repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<int64_t> max_tokens;  // max_completion_tokens wins over max_tokens
  int64_t min_tokens = 0;
  int64_t n = 1;
  std::vector<std::string> stop;  // empty strings dropped
  std::vector<int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage; always false when not streaming
  bool return_token_ids = false;
  std::optional<int64_t> seed;  // negative seeds are kept; the engine uses their two's complement
  std::vector<std::pair<int32_t, float>> logit_bias;  // one entry per token id, in request order
  std::optional<int64_t> prompt_logprobs;
  // Structured output (§15): the GBNF text every choice must follow — compiled from
  // response_format's JSON schema, json_object's grammar, or the `grammar` extension as given —
  // and the request field it came from (errors name it). The route compiles it to `constraint`.
  std::optional<std::string> grammar;
  std::string grammar_param;
};

enum class ToolChoiceKind { kNone, kAuto, kRequired, kNamed };

// What the chat template is rendered from (§2.4, §11, §12.1); shared by chat and /tokenize.
struct ChatPromptFields {
  // Normalised for the template: developer → system; text parts joined into one string; an
  // assistant's null or absent content as ""; assistant tool_calls as {"id"?, "type":"function",
  // "function": {"name", "arguments": object}} with string arguments parsed; `reasoning` →
  // reasoning_content; tool messages keep tool_call_id and name. Other keys are dropped.
  nlohmann::ordered_json messages = nullptr;
  // As received, key order kept (the template serializes it with tojson); null when absent,
  // empty, or when tool_choice is none.
  nlohmann::ordered_json tools = nullptr;
  ToolChoiceKind tool_choice = ToolChoiceKind::kNone;  // auto when tools are given
  std::string tool_choice_name;                        // set for kNamed
  // After merging the top-level enable_thinking and reasoning_effort switches (§11); null values
  // are dropped (null means absent).
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  // A JSON response_format (json_object, json_schema) as given, for chat formats that state it in
  // the prompt as well (Kimi K3's response-format message); null otherwise.
  nlohmann::ordered_json response_format = nullptr;
};

struct ChatRequest : CommonFields, ChatPromptFields {
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool parallel_tool_calls = true;
};

// One completions prompt: text to tokenize, or token ids used unchanged.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;  // used when text is unset
};

struct CompletionRequest : CommonFields {
  std::vector<PromptInput> prompts;  // never empty
  bool echo = false;
  std::optional<int64_t> logprobs;  // true → 1, false → absent
  bool add_special_tokens = true;
};

// /tokenize (§1.3): either `prompt` (alias `content`) or chat `messages`. In the messages form
// the ChatPromptFields are filled exactly as for a chat request, so that the count matches.
struct TokenizeRequest : ChatPromptFields {
  std::string model;
  std::optional<std::string> prompt;  // set in the plain-text form; messages is null then
  bool add_special_tokens = true;     // default true for prompt, false for messages
  bool return_token_strs = false;
};

// /detokenize (§1.4).
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Each takes the body as parse_json_body returned it (an object) and throws ApiError.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body, const RequestLimits& limits);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body,
                                           const RequestLimits& limits);
TokenizeRequest parse_tokenize_request(const nlohmann::ordered_json& body,
                                       const RequestLimits& limits);
DetokenizeRequest parse_detokenize_request(const nlohmann::ordered_json& body,
                                           const RequestLimits& limits);

// The served id that `name` denotes (itself or one of its aliases), or the served id when `name`
// is absent; model_not_found otherwise.
std::string resolve_model(const std::optional<std::string>& name, const RequestLimits& limits);

}  // namespace md::server
