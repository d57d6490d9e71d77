// Starting the generation of a chat request: the prompt rendered and checked against the
// context, the engine request with its sampling, and the admitted RequestRun. Shared by
// /v1/chat/completions and /v1/responses (which becomes a chat request, responses_request.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "engine/generation_request.h"
#include "server/chat_prompt.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/request_run.h"
#include "server/server_context.h"

namespace md::server {

struct ChatRun {
  ChatPrompt prompt;
  engine::GenerationRequest engine_request;  // choice 0's (the others differ only in seed)
  std::shared_ptr<RequestRun> run;
};

// `prompt_param` names the field a too-long prompt is blamed on; `endpoint` is the metrics label
// of the request. Throws ApiError (400 for the prompt and limits, 429 / 503 from admission).
ChatRun start_chat_run(ServerContext& context, const HttpRequest& req, const ChatRequest& request,
                       const std::string& id, std::string_view prompt_param,
                       std::string_view endpoint, std::chrono::steady_clock::time_point arrival);

}  // namespace md::server
