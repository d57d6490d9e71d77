// The route handlers (one file each, *_route.cpp / *_routes.cpp). They throw ApiError for client
// mistakes; the server turns anything else into a 500.
#pragma once

#include "server/server_context.h"

namespace md::server {

void handle_chat(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_responses(ServerContext& context, const HttpRequest& req, HttpResponse& res);
// GET or DELETE /v1/responses/{id}.
void handle_response_by_id(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_completions(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_tokenize(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_detokenize(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_chat_page(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_health(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_models(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_model(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_metrics(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_version(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_props(ServerContext& context, const HttpRequest& req, HttpResponse& res);
void handle_slots(ServerContext& context, const HttpRequest& req, HttpResponse& res);

}  // namespace md::server
