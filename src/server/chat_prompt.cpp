#include "server/chat_prompt.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "text/jinja/error.h"
#include "text/reasoning_parser.h"

namespace md::server {
namespace {

// For tool_choice "required" or a named function the call is forced by writing its start into
// the prompt (§12.1).
std::string forced_tool_prefix(const ChatPromptFields& fields, ToolCallFormat format) {
  switch (fields.tool_choice) {
    case ToolChoiceKind::kRequired:
      return "<tool_call>\n";
    case ToolChoiceKind::kNamed:
      return format == ToolCallFormat::kXml
                 ? fmt::format("<tool_call>\n<function={}>\n", fields.tool_choice_name)
                 : fmt::format("<tool_call>\n{{\"name\": \"{}\", \"arguments\": ",
                               fields.tool_choice_name);
    default:
      return "";
  }
}

// The text of the final message as the template wrote it, so that the prompt can stop right
// after it (continue_final_message): vLLM's approach of cutting at the message's last occurrence.
std::string continue_final(const std::string& rendered, const nlohmann::ordered_json& messages) {
  const nlohmann::ordered_json& last = messages.back();
  if (!last.contains("content") || !last["content"].is_string()) return rendered;
  const std::string& content = last["content"].get_ref<const std::string&>();
  if (content.empty()) return rendered;
  std::size_t at = rendered.rfind(content);
  if (at == std::string::npos) return rendered;
  return rendered.substr(0, at + content.size());
}

// Kimi K3's format states a required tool choice in the prompt (a system message) instead of a
// forced prefix, a named one it has no way to state; and it states a JSON response format.
void kimi_prompt_switches(const ChatPromptFields& fields, ChatTemplateOptions& options) {
  if (fields.tool_choice == ToolChoiceKind::kNamed) {
    throw invalid_value_message(
        "tool_choice",
        "This model's chat format (Kimi K3) cannot force a named function; use 'auto' or "
        "'required'.");
  }
  if (fields.tool_choice == ToolChoiceKind::kRequired) options.extra["tool_choice"] = "required";
  // A JSON response format is stated in the prompt too (K3's response-format message).
  if (!fields.response_format.is_null()) options.extra["response_format"] = fields.response_format;
}

}  // namespace

ChatPrompt render_chat_prompt(const ChatPromptFields& fields, const ChatTemplate* chat_template,
                              const Tokenizer& tokenizer, ToolCallFormat format) {
  if (chat_template == nullptr) {
    throw invalid_value_message(
        "messages", "This model has no chat template; use /v1/completions with a prompt.");
  }
  if (!fields.tools.is_null() && !chat_template->takes_tools()) {
    throw invalid_value_message(
        "tools",
        "This model's chat template does not use tools, so the model would never see them; send "
        "the request without 'tools' (or with tool_choice 'none').");
  }
  ChatTemplateOptions options;
  options.add_generation_prompt = fields.add_generation_prompt;
  options.tools = fields.tools;
  options.extra = fields.chat_template_kwargs;
  ChatPrompt prompt;
  if (chat_template->is_kimi_xtml()) {
    kimi_prompt_switches(fields, options);
  } else {
    prompt.forced_prefix = forced_tool_prefix(fields, format);
  }
  // A forced call is rendered with thinking off, whatever the switches say.
  if (!prompt.forced_prefix.empty()) options.extra["enable_thinking"] = false;
  std::vector<ChatSegment> segments;
  try {
    segments = chat_template->render_segments(fields.messages, options);
    prompt.text = join_segments(segments);
  } catch (const jinja::TemplateError& e) {
    if (e.kind() == jinja::TemplateError::Kind::kRaised) throw chat_template_error(e.detail());
    throw internal_error(fmt::format("chat template failed: {}", e.what()));
  }
  if (fields.continue_final_message) {
    prompt.text = continue_final(prompt.text, fields.messages);
    segments = segments_before(segments, prompt.text.size());
  }
  prompt.text += prompt.forced_prefix;
  prompt.starts_in_reasoning = ReasoningParser::starts_in_reasoning(prompt.text);
  // Segments keep a marker typed in a message from becoming structure (Kimi K3); the forced
  // prefix (other formats) is the format's own text.
  segments.push_back({prompt.forced_prefix, true});
  prompt.ids = encode_chat_segments(tokenizer, segments);
  return prompt;
}

}  // namespace md::server
