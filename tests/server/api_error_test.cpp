#include "server/api_error.h"

#include <gtest/gtest.h>

#include <string>

namespace md::server {
namespace {

using Json = nlohmann::ordered_json;

void expect_fields(const ApiError& e, int status, const std::string& type, const std::string& code,
                   const std::optional<std::string>& param, const std::string& message) {
  EXPECT_EQ(e.status, status);
  EXPECT_EQ(e.type, type);
  EXPECT_EQ(e.code, code);
  EXPECT_EQ(e.param, param);
  EXPECT_EQ(e.message, message);
  EXPECT_STREQ(e.what(), message.c_str());
}

void expect_bad_request(const ApiError& e, const std::string& code,
                        const std::optional<std::string>& param, const std::string& message) {
  expect_fields(e, 400, "invalid_request_error", code, param, message);
}

TEST(ApiError, BodyHasTheFourFieldsInOrder) {
  // The example of §2.1, byte for byte.
  EXPECT_EQ(
      invalid_value("temperature", "a number between 0 and 2").body().dump(),
      R"({"error":{"message":"Invalid value for 'temperature': expected a number between 0 )"
      R"(and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}})");
}

TEST(ApiError, BodyWritesAMissingParamAsNull) {
  EXPECT_EQ(
      invalid_json().body().dump(),
      R"({"error":{"message":"Request body is not valid JSON.","type":"invalid_request_error",)"
      R"("param":null,"code":"invalid_json"}})");
}

TEST(ApiError, IsAStdExceptionCarryingTheMessage) {
  try {
    throw missing_required("messages");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "Missing required parameter: 'messages'.");
  }
}

TEST(ApiError, FieldTemplatesOfSection2_1) {
  expect_bad_request(missing_required("messages[0].content"), "missing_required_parameter",
                     "messages[0].content", "Missing required parameter: 'messages[0].content'.");
  expect_bad_request(invalid_type("stream", "a boolean"), "invalid_type", "stream",
                     "Invalid type for 'stream': expected a boolean.");
  expect_bad_request(invalid_value("max_tokens", "an integer between 0 and 2147483647"),
                     "invalid_value", "max_tokens",
                     "Invalid value for 'max_tokens': expected an integer between 0 and "
                     "2147483647.");
  expect_bad_request(invalid_choice("tool_choice", {"none", "auto", "required"}), "invalid_value",
                     "tool_choice",
                     "Invalid value for 'tool_choice': expected one of 'none', 'auto', "
                     "'required'.");
  expect_bad_request(invalid_choice("x", std::vector<std::string>{"low", "medium", "xhigh"}),
                     "invalid_value", "x",
                     "Invalid value for 'x': expected one of 'low', 'medium', 'xhigh'.");
  expect_bad_request(unsupported_parameter("functions"), "unsupported_parameter", "functions",
                     "Unsupported parameter: 'functions' is not supported by this server.");
  expect_bad_request(unsupported_value("response_format.type", "json_schema"), "unsupported_value",
                     "response_format.type",
                     "Unsupported value for 'response_format.type': \"json_schema\" is not "
                     "supported by this server.");
  expect_bad_request(invalid_value_message("top_logprobs", "'top_logprobs' requires 'logprobs'."),
                     "invalid_value", "top_logprobs", "'top_logprobs' requires 'logprobs'.");
  expect_bad_request(chat_template_error("No user query found."), "invalid_value", "messages",
                     "Chat template error: No user query found.");
}

TEST(ApiError, UnsupportedValueShowsCompactJsonWithRawNonAscii) {
  EXPECT_EQ(unsupported_value("modalities", Json::array({"text", "audio"})).message,
            "Unsupported value for 'modalities': [\"text\",\"audio\"] is not supported by this "
            "server.");
  EXPECT_EQ(unsupported_value("t", "h\xC3\xA9").message,
            "Unsupported value for 't': \"h\xC3\xA9\" is not supported by this server.");
  EXPECT_EQ(unsupported_value("t", Json::parse(R"({"b":1,"a":[2]})")).message,
            "Unsupported value for 't': {\"b\":1,\"a\":[2]} is not supported by this server.");
}

TEST(ApiError, BodyErrorsOfSection9) {
  expect_bad_request(invalid_json(), "invalid_json", std::nullopt,
                     "Request body is not valid JSON.");
  expect_bad_request(invalid_encoding(), "invalid_encoding", std::nullopt,
                     "Request body is not valid UTF-8.");
  expect_bad_request(not_an_object(), "invalid_type", std::nullopt,
                     "Request body must be a JSON object.");
  expect_bad_request(model_not_found("gpt-4"), "model_not_found", "model",
                     "The model 'gpt-4' does not exist.");
  expect_fields(model_not_found("x", 404), 404, "invalid_request_error", "model_not_found", "model",
                "The model 'x' does not exist.");
  expect_bad_request(context_length_exceeded("messages", 8193, 8191, 8192),
                     "context_length_exceeded", "messages",
                     "The prompt has 8193 tokens, but at most 8191 prompt tokens are allowed "
                     "(max_model_len is 8192).");
}

TEST(ApiError, TransportErrorsOfSection9) {
  expect_fields(invalid_api_key(), 401, "authentication_error", "invalid_api_key", std::nullopt,
                "Invalid or missing API key.");
  expect_fields(unknown_url("GET", "/v1/nope"), 404, "invalid_request_error", "unknown_url",
                std::nullopt, "Invalid URL (GET /v1/nope)");
  expect_fields(method_not_allowed("GET", "/v1/chat/completions"), 405, "invalid_request_error",
                "method_not_allowed", std::nullopt,
                "Method GET is not allowed for /v1/chat/completions.");
  expect_fields(length_required(), 411, "invalid_request_error", "length_required", std::nullopt,
                "Content-Length or chunked transfer encoding is required.");
  expect_fields(request_too_large(16777216), 413, "invalid_request_error", "request_too_large",
                std::nullopt, "Request body is larger than the limit of 16777216 bytes.");
  expect_fields(internal_error("device error"), 500, "server_error", "internal_error", std::nullopt,
                "Internal server error.");
  EXPECT_FALSE(internal_error("x").retry_after_seconds.has_value());
  // The cause stays on the server: the body names the request id instead.
  const ApiError sent = with_request_id(internal_error("/models/x.gguf: bad block"), "req-7");
  EXPECT_EQ(sent.body().dump().find("/models"), std::string::npos);
  EXPECT_EQ(sent.message,
            "Internal server error (request id req-7); the server's log has the cause.");
  EXPECT_EQ(with_request_id(invalid_value("x", "a number"), "req-7").message,
            invalid_value("x", "a number").message);
  EXPECT_FALSE(invalid_json().retry_after_seconds.has_value());
}

TEST(ApiError, QueueFullIsRetryableAfterOneSecond) {
  const ApiError e = queue_full(256);
  expect_fields(e, 429, "rate_limit_error", "queue_full", std::nullopt,
                "The server is busy: 256 requests are waiting (limit 256). Retry later.");
  EXPECT_EQ(e.retry_after_seconds, 1);
}

TEST(ApiError, UnavailableHasTheMessagesOfSection1_1) {
  expect_fields(unavailable(Unavailable::kModelLoading), 503, "unavailable_error", "model_loading",
                std::nullopt, "The model is still loading.");
  expect_fields(unavailable(Unavailable::kShuttingDown), 503, "unavailable_error", "shutting_down",
                std::nullopt, "The server is shutting down.");
  expect_fields(unavailable(Unavailable::kEngineFailed), 503, "unavailable_error", "engine_failed",
                std::nullopt, "The inference engine has stopped.");
  EXPECT_EQ(unavailable(Unavailable::kModelLoading).retry_after_seconds, 5);
  // The exact body of §1.1.
  EXPECT_EQ(unavailable(Unavailable::kModelLoading).body().dump(),
            R"({"error":{"message":"The model is still loading.","type":"unavailable_error",)"
            R"("param":null,"code":"model_loading"}})");
}

}  // namespace
}  // namespace md::server
