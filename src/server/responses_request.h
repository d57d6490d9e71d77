// The body of POST /v1/responses (docs/openai-api.md §14) validated and turned into the chat
// request the engine runs: `input` (a string, or message / function_call / function_call_output /
// reasoning items) after the conversation of `previous_response_id`, `instructions` as the first
// system message, function tools and tool_choice in the chat form, max_output_tokens as the
// token limit. Errors name the Responses fields, not the chat fields they became.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/generation_request.h"
#include "server/request_fields.h"
#include "server/response_store.h"

namespace md::server {

struct ResponsesRequest {
  ChatRequest chat;  // n = 1; chat.stream is the request's stream
  // The chat messages of the predecessors' conversation and this input, without instructions:
  // what a continuation of this response starts from (StoredResponse::conversation).
  Json conversation = Json::array();
  std::optional<std::string> instructions;
  std::optional<int64_t> max_output_tokens;
  std::optional<std::string> previous_response_id;
  bool store = true;
  Json tools = Json::array();  // as received (the Responses form), echoed in the response
  Json tool_choice = "auto";   // as received; "auto" when absent
  Json reasoning_effort = nullptr;
  Json metadata = Json::object();
  Json user = nullptr;
};

// Throws ApiError (400) for a body that is not a valid Responses request, names a feature this
// server does not have (background, non-text output formats, non-function tools, inputs other
// than text), or a previous_response_id that `store` does not hold.
ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits,
                                         const ResponseStore& store);

}  // namespace md::server
