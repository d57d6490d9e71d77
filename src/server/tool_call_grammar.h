// Structured output for tool calls (§12.5): when a request has a strict function, the grammar of
// the calls its tools and tool_choice allow, in the model's tool-call format, with each strict
// function's arguments following its `parameters` schema. A forced call (tool_choice required, or
// a named strict function) is constrained from the first output token (the prompt already holds
// the call's start, §12.1); under tool_choice auto the calls are constrained lazily: the text is
// free until the model opens a call, the call follows the grammar, and the text is free again.
#pragma once

#include <optional>
#include <string>

#include "server/generation_request.h"
#include "text/tool_call_parser.h"

namespace md::server {

struct ToolCallGrammar {
  std::string gbnf;
  // True: the grammar applies from each <tool_call> token (auto) to the end of that call; false:
  // from the first output token to the end of the choice (a forced call).
  bool lazy = false;
};

// Null when nothing is constrained: no tools, tool_choice none, no strict function (a named
// function must itself be strict).
// A strict tool whose parameters use a schema feature structured output cannot honour is a 400
// naming tools[i].function.parameters.
std::optional<ToolCallGrammar> tool_call_grammar(const ChatRequest& request, ToolCallFormat format);

}  // namespace md::server
