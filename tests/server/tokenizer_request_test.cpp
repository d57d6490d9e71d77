// parse_tokenize_request and parse_detokenize_request against docs/openai-api.md §1.3 and §1.4.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/json_body.h"

namespace md::server {
namespace {

using Json = nlohmann::ordered_json;

RequestLimits test_limits() {
  RequestLimits limits;
  limits.vocab_size = 1000;
  limits.model_names = {"tiny-model", "tiny"};
  limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  return limits;
}

TokenizeRequest tokenize(std::string_view body) {
  return parse_tokenize_request(parse_json_body(body), test_limits());
}
DetokenizeRequest detokenize(std::string_view body) {
  return parse_detokenize_request(parse_json_body(body), test_limits());
}

template <typename Parse>
ApiError error_of(Parse parse, std::string_view body) {
  try {
    parse(parse_json_body(body), test_limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "", std::nullopt, "");
}
ApiError tokenize_error(std::string_view body) {
  return error_of(parse_tokenize_request, body);
}
ApiError detokenize_error(std::string_view body) {
  return error_of(parse_detokenize_request, body);
}

testing::AssertionResult is_error(const ApiError& e, std::string_view code, const char* param,
                                  std::string_view message = {}) {
  const bool param_ok = param == nullptr ? !e.param.has_value() : e.param == param;
  if (e.status == 400 && e.code == code && param_ok && (message.empty() || e.message == message)) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << "got " << e.body().dump();
}

constexpr std::string_view kMessages = R"([{"role":"user","content":"hi"}])";

// A chat-form body: kMessages plus `extra` members.
std::string with_messages(std::string_view extra) {
  return R"({"messages":)" + std::string(kMessages) + "," + std::string(extra) + "}";
}

// ---- /tokenize ----

TEST(TokenizeRequest, PlainText) {
  const TokenizeRequest r = tokenize(R"({"prompt":"Hello world"})");
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_EQ(r.prompt, "Hello world");
  EXPECT_TRUE(r.messages.is_null());
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_FALSE(r.return_token_strs);
  const TokenizeRequest options =
      tokenize(R"({"prompt":"","add_special_tokens":false,"return_token_strs":true})");
  EXPECT_EQ(options.prompt, "");
  EXPECT_FALSE(options.add_special_tokens);
  EXPECT_TRUE(options.return_token_strs);
}

TEST(TokenizeRequest, ContentIsAnAliasOfPrompt) {
  EXPECT_EQ(tokenize(R"({"content":"abc"})").prompt, "abc");
  EXPECT_EQ(tokenize(R"({"prompt":"p","content":"c"})").prompt, "p");
  EXPECT_TRUE(is_error(tokenize_error(R"({"content":5})"), "invalid_type", "content"));
}

TEST(TokenizeRequest, ChatMessages) {
  const TokenizeRequest r = tokenize(R"({"model":"tiny","messages":[{"role":"developer",
      "content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"user","content":"hi"}],"return_token_strs":true})");
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_FALSE(r.prompt.has_value());
  EXPECT_EQ(r.messages.dump(),
            R"([{"role":"system","content":"ab"},{"role":"user","content":"hi"}])");
  EXPECT_FALSE(r.add_special_tokens);  // the template carries the special tokens
  EXPECT_TRUE(r.return_token_strs);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoiceKind::kNone);
  EXPECT_EQ(r.chat_template_kwargs, Json::object());
  EXPECT_TRUE(tokenize(R"({"messages":[{"role":"user","content":"x"}],"add_special_tokens":true})")
                  .add_special_tokens);
}

TEST(TokenizeRequest, ChatRenderingInputsMatchAChatRequest) {
  const TokenizeRequest r =
      tokenize(with_messages(R"("tools":[{"type":"function","function":{"name":"f"}}],
      "tool_choice":"required","reasoning_effort":"high","enable_thinking":true,
      "chat_template_kwargs":{"x":1},"add_generation_prompt":false,
      "continue_final_message":true)"));
  EXPECT_EQ(r.tools.dump(), R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(r.tool_choice, ToolChoiceKind::kRequired);
  EXPECT_EQ(r.chat_template_kwargs.dump(),
            R"({"x":1,"enable_thinking":true,"reasoning_effort":"xhigh"})");
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  const TokenizeRequest named =
      tokenize(with_messages(R"("tools":[{"type":"function","function":{"name":"f"}}],
      "tool_choice":{"type":"function","function":{"name":"f"}})"));
  EXPECT_EQ(named.tool_choice, ToolChoiceKind::kNamed);
  EXPECT_EQ(named.tool_choice_name, "f");
}

TEST(TokenizeRequest, ExactlyOneOfPromptOrMessages) {
  EXPECT_TRUE(is_error(tokenize_error("{}"), "missing_required_parameter", "prompt",
                       "Missing required parameter: 'prompt'."));
  EXPECT_TRUE(is_error(tokenize_error(R"({"prompt":null,"messages":null})"),
                       "missing_required_parameter", "prompt"));
  const std::string both = "Provide either 'prompt' or 'messages', not both.";
  EXPECT_TRUE(is_error(tokenize_error(R"({"prompt":"a","messages":[]})"), "invalid_value",
                       "messages", both));
  EXPECT_TRUE(is_error(
      tokenize_error(std::string(R"({"content":"a","messages":)") + std::string(kMessages) + "}"),
      "invalid_value", "messages", both));
  EXPECT_EQ(tokenize(std::string(R"({"prompt":null,"messages":)") + std::string(kMessages) + "}")
                .messages.size(),
            1u);
}

TEST(TokenizeRequest, FieldErrors) {
  EXPECT_TRUE(is_error(tokenize_error(R"({"prompt":5})"), "invalid_type", "prompt",
                       "Invalid type for 'prompt': expected a string."));
  EXPECT_TRUE(is_error(tokenize_error(R"({"prompt":"a","add_special_tokens":"no"})"),
                       "invalid_type", "add_special_tokens"));
  EXPECT_TRUE(is_error(tokenize_error(R"({"prompt":"a","return_token_strs":1})"), "invalid_type",
                       "return_token_strs"));
  EXPECT_TRUE(is_error(tokenize_error(R"({"messages":[]})"), "invalid_value", "messages"));
  EXPECT_TRUE(is_error(tokenize_error(R"({"messages":[{"role":"wizard","content":"x"}]})"),
                       "invalid_value", "messages[0].role"));
  EXPECT_TRUE(is_error(
      tokenize_error(with_messages(R"("chat_template_kwargs":{"reasoning_effort":"extreme"})")),
      "invalid_value", "chat_template_kwargs.reasoning_effort"));
  EXPECT_TRUE(is_error(tokenize_error(with_messages(R"("tool_choice":"auto")")), "invalid_value",
                       "tool_choice", "'tool_choice' requires 'tools'."));
  EXPECT_TRUE(is_error(tokenize_error(with_messages(R"("continue_final_message":true)")),
                       "invalid_value", "continue_final_message"));
}

TEST(TokenizeRequest, ModelName) {
  EXPECT_TRUE(is_error(tokenize_error(R"({"model":"gpt-4","prompt":"a"})"), "model_not_found",
                       "model", "The model 'gpt-4' does not exist."));
  EXPECT_TRUE(is_error(tokenize_error(R"({"model":1,"prompt":"a"})"), "invalid_type", "model"));
  EXPECT_EQ(tokenize(R"({"model":"tiny","prompt":"a"})").model, "tiny-model");
}

// ---- /detokenize ----

TEST(DetokenizeRequest, TokenIds) {
  const DetokenizeRequest r = detokenize(R"({"tokens":[0,5,999,7.0],"model":"tiny"})");
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 5, 999, 7}));
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_TRUE(detokenize(R"({"tokens":[]})").tokens.empty());
}

TEST(DetokenizeRequest, OutOfRangeIdsHaveTheExactMessage) {  // §13 item 10
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[-1]})"), "invalid_value", "tokens[0]",
                       "Invalid value for 'tokens[0]': token id -1 is outside [0, 1000)."));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[1000]})"), "invalid_value", "tokens[0]",
                       "Invalid value for 'tokens[0]': token id 1000 is outside [0, 1000)."));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[1,2,3000.0]})"), "invalid_value", "tokens[2]",
                       "Invalid value for 'tokens[2]': token id 3000 is outside [0, 1000)."));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[9223372036854775808]})"), "invalid_value",
                       "tokens[0]",
                       "Invalid value for 'tokens[0]': token id 9223372036854775808 is outside "
                       "[0, 1000)."));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[1e30]})"), "invalid_value", "tokens[0]",
                       "Invalid value for 'tokens[0]': token id 1e+30 is outside [0, 1000)."));
}

TEST(DetokenizeRequest, TypeErrors) {
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[1,"2"]})"), "invalid_type", "tokens[1]",
                       "Invalid type for 'tokens[1]': expected an integer."));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[1.5]})"), "invalid_type", "tokens[0]"));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[true]})"), "invalid_type", "tokens[0]"));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":[null]})"), "invalid_type", "tokens[0]"));
  EXPECT_TRUE(is_error(detokenize_error(R"({"tokens":"1 2"})"), "invalid_type", "tokens",
                       "Invalid type for 'tokens': expected an array."));
  EXPECT_TRUE(is_error(detokenize_error("{}"), "missing_required_parameter", "tokens",
                       "Missing required parameter: 'tokens'."));
  EXPECT_TRUE(
      is_error(detokenize_error(R"({"tokens":[1],"model":"gpt-4"})"), "model_not_found", "model"));
}

}  // namespace
}  // namespace md::server
