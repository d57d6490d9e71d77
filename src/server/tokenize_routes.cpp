// POST /tokenize and POST /detokenize (§1.3, §1.4).
#include "server/chat_prompt.h"
#include "server/json_body.h"
#include "server/routes.h"
#include "server/token_text.h"

namespace md::server {

void handle_tokenize(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  nlohmann::ordered_json body = parse_json_body(req.body);
  context.require_tokenizer();
  TokenizeRequest request = parse_tokenize_request(body, context.limits);
  const Tokenizer& tokenizer = *context.model.tokenizer;
  std::vector<int32_t> ids;
  if (request.prompt) {
    ids = tokenizer.encode(*request.prompt, /*parse_special=*/true);
  } else {
    ids = render_chat_prompt(request, context.model.chat_template, tokenizer, context.tool_format)
              .ids;
  }
  nlohmann::ordered_json out{
      {"count", ids.size()}, {"max_model_len", context.model.context}, {"tokens", ids}};
  if (request.return_token_strs) {
    nlohmann::ordered_json strs = nlohmann::ordered_json::array();
    for (int32_t id : ids) strs.push_back(token_string(tokenizer, id));
    out["token_strs"] = std::move(strs);
  }
  send_json(res, out);
}

void handle_detokenize(ServerContext& context, const HttpRequest& req, HttpResponse& res) {
  nlohmann::ordered_json body = parse_json_body(req.body);
  context.require_tokenizer();
  DetokenizeRequest request = parse_detokenize_request(body, context.limits);
  send_json(res, {{"prompt", context.model.tokenizer->decode(request.tokens, false)}});
}

}  // namespace md::server
