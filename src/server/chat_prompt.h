// Renders a chat request into the model's prompt (§2.4, §11, §12.1): the chat template with the
// messages, tools and template switches, a continued final message, and the forced tool-call
// prefix. Shared by the chat route and /tokenize so that their token counts agree.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/generation_request.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "text/tool_call_parser.h"

namespace md::server {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
  std::string forced_prefix;  // the forced tool-call prefix at the end of the prompt ("" if none)
  bool starts_in_reasoning = false;
};

// Throws ApiError: chat_template_error for the template's raise_exception, invalid_value for a
// model without a chat template, internal_error for other template failures.
ChatPrompt render_chat_prompt(const ChatPromptFields& fields, const ChatTemplate* chat_template,
                              const Tokenizer& tokenizer, ToolCallFormat format);

}  // namespace md::server
