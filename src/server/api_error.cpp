#include "server/api_error.h"

#include <fmt/format.h>

#include <utility>

#include "base/log.h"

namespace md::server {
namespace {

constexpr std::string_view kInvalidRequest = "invalid_request_error";

ApiError bad_request(std::string code, std::optional<std::string> param, std::string message) {
  return ApiError(400, std::string(kInvalidRequest), std::move(code), std::move(param),
                  std::move(message));
}

// "'a', 'b', 'c'" for the enum template of §2.1.
template <typename Range>
std::string quoted_list(const Range& choices) {
  std::string out;
  for (const auto& choice : choices) {
    if (!out.empty()) out += ", ";
    out += fmt::format("'{}'", choice);
  }
  return out;
}

}  // namespace

ApiError::ApiError(int status_code, std::string error_type, std::string error_code,
                   std::optional<std::string> error_param, std::string error_message)
    : status(status_code),
      type(std::move(error_type)),
      code(std::move(error_code)),
      param(std::move(error_param)),
      message(std::move(error_message)) {}

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json error = nlohmann::ordered_json::object();
  error["message"] = message;
  error["type"] = type;
  error["param"] = param ? nlohmann::ordered_json(*param) : nlohmann::ordered_json(nullptr);
  error["code"] = code;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["error"] = std::move(error);
  return out;
}

ApiError missing_required(std::string_view param) {
  return bad_request("missing_required_parameter", std::string(param),
                     fmt::format("Missing required parameter: '{}'.", param));
}

ApiError invalid_type(std::string_view param, std::string_view type_phrase) {
  return bad_request("invalid_type", std::string(param),
                     fmt::format("Invalid type for '{}': expected {}.", param, type_phrase));
}

ApiError invalid_value(std::string_view param, std::string_view rule) {
  return bad_request("invalid_value", std::string(param),
                     fmt::format("Invalid value for '{}': expected {}.", param, rule));
}

ApiError invalid_choice(std::string_view param, std::initializer_list<std::string_view> choices) {
  return invalid_value(param, "one of " + quoted_list(choices));
}

ApiError invalid_choice(std::string_view param, const std::vector<std::string>& choices) {
  return invalid_value(param, "one of " + quoted_list(choices));
}

ApiError unsupported_parameter(std::string_view param) {
  return bad_request(
      "unsupported_parameter", std::string(param),
      fmt::format("Unsupported parameter: '{}' is not supported by this server.", param));
}

ApiError unsupported_value(std::string_view param, const nlohmann::ordered_json& value) {
  // Compact, non-ASCII written raw (§0). The value came from a parsed body, so it is valid UTF-8;
  // `replace` only guards against a caller passing something else.
  const std::string shown =
      value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return bad_request(
      "unsupported_value", std::string(param),
      fmt::format("Unsupported value for '{}': {} is not supported by this server.", param, shown));
}

ApiError invalid_value_message(std::optional<std::string> param, std::string message) {
  return bad_request("invalid_value", std::move(param), std::move(message));
}

ApiError chat_template_error(std::string_view template_message) {
  return invalid_value_message("messages",
                               fmt::format("Chat template error: {}", template_message));
}

ApiError invalid_json() {
  return bad_request("invalid_json", std::nullopt, "Request body is not valid JSON.");
}

ApiError invalid_encoding() {
  return bad_request("invalid_encoding", std::nullopt, "Request body is not valid UTF-8.");
}

ApiError not_an_object() {
  return bad_request("invalid_type", std::nullopt, "Request body must be a JSON object.");
}

ApiError model_not_found(std::string_view name, int status) {
  return ApiError(status, std::string(kInvalidRequest), "model_not_found", "model",
                  fmt::format("The model '{}' does not exist.", name));
}

ApiError context_length_exceeded(std::string_view param, int64_t prompt_tokens, int64_t limit,
                                 int64_t max_model_len) {
  return bad_request("context_length_exceeded", std::string(param),
                     fmt::format("The prompt has {} tokens, but at most {} prompt tokens are "
                                 "allowed (max_model_len is {}).",
                                 prompt_tokens, limit, max_model_len));
}

ApiError state_memory_exceeded(std::size_t budget_bytes) {
  return bad_request("kv_memory_exceeded", "max_tokens",
                     fmt::format("The prompt plus max_tokens needs more sequence memory than the "
                                 "server's limit of {} (--kv-memory): lower max_tokens or "
                                 "shorten the prompt.",
                                 budget_bytes >= (1u << 20)
                                     ? fmt::format("{:.1f} MiB", budget_bytes / double(1 << 20))
                                     : fmt::format("{:.1f} KiB", budget_bytes / 1024.0)));
}

ApiError invalid_api_key() {
  return ApiError(401, "authentication_error", "invalid_api_key", std::nullopt,
                  "Invalid or missing API key.");
}

ApiError unknown_url(std::string_view method, std::string_view path) {
  return ApiError(404, std::string(kInvalidRequest), "unknown_url", std::nullopt,
                  fmt::format("Invalid URL ({} {})", method, path));
}

ApiError method_not_allowed(std::string_view method, std::string_view path) {
  return ApiError(405, std::string(kInvalidRequest), "method_not_allowed", std::nullopt,
                  fmt::format("Method {} is not allowed for {}.", method, path));
}

ApiError length_required() {
  return ApiError(411, std::string(kInvalidRequest), "length_required", std::nullopt,
                  "Content-Length or chunked transfer encoding is required.");
}

ApiError bad_framing(std::string_view reason) {
  return ApiError(400, std::string(kInvalidRequest), "bad_request", std::nullopt,
                  fmt::format("The request body could not be read: {}.", reason));
}

ApiError unsupported_transfer_encoding(std::string_view codings) {
  return ApiError(501, std::string(kInvalidRequest), "not_implemented", std::nullopt,
                  fmt::format("Transfer-Encoding '{}' is not supported; send the body as it is "
                              "(Content-Length) or chunked.",
                              codings));
}

ApiError request_too_large(std::size_t limit) {
  return ApiError(413, std::string(kInvalidRequest), "request_too_large", std::nullopt,
                  fmt::format("Request body is larger than the limit of {} bytes.", limit));
}

ApiError queue_full(std::size_t queue_limit) {
  // The queue is full exactly when the waiting count equals the limit, so both numbers are q.
  ApiError error(
      429, "rate_limit_error", "queue_full", std::nullopt,
      fmt::format("The server is busy: {0} requests are waiting (limit {0}). Retry later.",
                  queue_limit));
  error.retry_after_seconds = 1;
  return error;
}

ApiError unavailable(Unavailable reason) {
  std::string code;
  std::string message;
  switch (reason) {
    case Unavailable::kModelLoading:
      code = "model_loading";
      message = "The model is still loading.";
      break;
    case Unavailable::kShuttingDown:
      code = "shutting_down";
      message = "The server is shutting down.";
      break;
    case Unavailable::kEngineFailed:
      code = "engine_failed";
      message = "The inference engine has stopped.";
      break;
  }
  ApiError error(503, "unavailable_error", std::move(code), std::nullopt, std::move(message));
  error.retry_after_seconds = 5;
  return error;
}

ApiError internal_error(std::string_view cause) {
  ApiError error(500, "server_error", "internal_error", std::nullopt, "Internal server error.");
  error.detail = std::string(cause);
  return error;
}

ApiError with_request_id(ApiError error, std::string_view request_id) {
  if (error.detail.empty()) return error;
  log::error("request {}: internal error: {}", request_id, error.detail);
  error.message = fmt::format(
      "Internal server error (request id {}); the server's log has the cause.", request_id);
  error.detail.clear();
  return error;
}

}  // namespace md::server
