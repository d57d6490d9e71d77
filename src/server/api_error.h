// The errors the HTTP API returns (docs/openai-api.md §2.1 and §9): one exception type carrying
// the HTTP status and the four fields of the {"error":{...}} body, and one factory per row of the
// spec's message tables so that every message text lives in exactly one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace md::server {

class ApiError : public std::exception {
 public:
  ApiError(int status_code, std::string error_type, std::string error_code,
           std::optional<std::string> error_param, std::string error_message);

  // {"error":{"message":...,"type":...,"param":...|null,"code":...}}, keys in that order.
  nlohmann::ordered_json body() const;
  const char* what() const noexcept override { return message.c_str(); }

  int status;
  std::string type;
  std::string code;
  std::optional<std::string> param;  // JSON path of the offending value; null when none
  std::string message;
  // Seconds for a Retry-After header: set on the retryable statuses (429 and 503, §9).
  std::optional<int> retry_after_seconds;
  // The cause of an internal error: logged with the request id, never sent (it may hold paths
  // or other details of the server's machine).
  std::string detail;
};

// ---- 400 invalid_request_error: field validation (§2.1) ----

// "Missing required parameter: '<param>'."
ApiError missing_required(std::string_view param);
// "Invalid type for '<param>': expected <type_phrase>."
ApiError invalid_type(std::string_view param, std::string_view type_phrase);
// "Invalid value for '<param>': expected <rule>."
ApiError invalid_value(std::string_view param, std::string_view rule);
// "Invalid value for '<param>': expected one of 'a', 'b'."
ApiError invalid_choice(std::string_view param, std::initializer_list<std::string_view> choices);
ApiError invalid_choice(std::string_view param, const std::vector<std::string>& choices);
// "Unsupported parameter: '<param>' is not supported by this server."
ApiError unsupported_parameter(std::string_view param);
// "Unsupported value for '<param>': <value as JSON> is not supported by this server."
ApiError unsupported_value(std::string_view param, const nlohmann::ordered_json& value);
// code invalid_value with a message of its own: the cross-field rules of §2.2 and the few
// per-field texts that do not follow the "expected <rule>" template.
ApiError invalid_value_message(std::optional<std::string> param, std::string message);
// "Chat template error: <msg>" (param messages), for a template's raise_exception (§2.4).
ApiError chat_template_error(std::string_view template_message);

// ---- 400 invalid_request_error: the body as a whole (§9) ----

ApiError invalid_json();      // "Request body is not valid JSON."
ApiError invalid_encoding();  // "Request body is not valid UTF-8."
ApiError not_an_object();     // invalid_type "Request body must be a JSON object."

// "The model '<name>' does not exist." (param model). 400 on generation routes; GET
// /v1/models/{id} answers the same body with 404.
ApiError model_not_found(std::string_view name, int status = 400);
// "The prompt has <n> tokens, but at most <limit> prompt tokens are allowed (max_model_len is
// <max_model_len>)." (§2.5); param is messages or prompt.
ApiError context_length_exceeded(std::string_view param, int64_t prompt_tokens, int64_t limit,
                                 int64_t max_model_len);
// 400: one choice (its prompt and max_tokens) needs more sequence memory than the server's whole
// --kv-memory budget, so it could never run.
ApiError state_memory_exceeded(std::size_t budget_bytes);

// ---- Transport and server state (§9) ----

ApiError invalid_api_key();                                            // 401
ApiError unknown_url(std::string_view method, std::string_view path);  // 404
// 405; the HTTP layer adds the Allow header.
ApiError method_not_allowed(std::string_view method, std::string_view path);
ApiError length_required();                     // 411
ApiError request_too_large(std::size_t limit);  // 413
// 400 bad_request: the request's framing is wrong (RFC 7230 §3.3): `reason` says how.
ApiError bad_framing(std::string_view reason);
// 501 not_implemented: a transfer coding other than chunked.
ApiError unsupported_transfer_encoding(std::string_view codings);
ApiError queue_full(std::size_t queue_limit);  // 429, Retry-After: 1

// Why the server cannot take generation requests now (§1.1); each has its own code and message.
enum class Unavailable { kModelLoading, kShuttingDown, kEngineFailed };
ApiError unavailable(Unavailable reason);  // 503, Retry-After: 5

// 500 server_error "Internal server error." with `cause` kept as the detail; never for a client
// mistake. with_request_id() finishes it before it is sent.
ApiError internal_error(std::string_view cause);

// For an internal error: logs its detail under `request_id` and names the id in the message, so
// that a user can report it and an operator find the cause. Other errors pass unchanged.
ApiError with_request_id(ApiError error, std::string_view request_id);

}  // namespace md::server
