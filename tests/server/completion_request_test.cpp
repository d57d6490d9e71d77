// parse_completion_request against docs/openai-api.md §2.3 (and the §2.2 rows it shares).
#include <fmt/format.h>
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
  return limits;
}

CompletionRequest completion_body(std::string_view body) {
  return parse_completion_request(parse_json_body(body), test_limits());
}
// A body with prompt "hi" plus `extra` members.
CompletionRequest completion(std::string_view extra) {
  return completion_body(R"({"prompt":"hi")" + std::string(extra.empty() ? "" : ",") +
                         std::string(extra) + "}");
}

ApiError body_error(std::string_view body) {
  try {
    completion_body(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "", std::nullopt, "");
}
ApiError error(std::string_view extra) {
  return body_error(R"({"prompt":"hi",)" + std::string(extra) + "}");
}
ApiError prompt_error(std::string_view prompt) {
  return body_error(R"({"prompt":)" + std::string(prompt) + "}");
}

testing::AssertionResult is_error(const ApiError& e, std::string_view code, const char* param,
                                  std::string_view message = {}) {
  const bool param_ok = param == nullptr ? !e.param.has_value() : e.param == param;
  if (e.status == 400 && e.code == code && param_ok && (message.empty() || e.message == message)) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << "got " << e.body().dump();
}

constexpr std::string_view kPromptTypeMessage =
    "Invalid type for 'prompt': expected a string, an array of strings, an array of token ids or "
    "an array of arrays of token ids.";

TEST(CompletionRequest, Defaults) {
  const CompletionRequest r = completion("");
  EXPECT_EQ(r.model, "tiny-model");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_FALSE(r.max_tokens.has_value());  // the server's default (16) applies later
  EXPECT_FALSE(r.echo);
  EXPECT_FALSE(r.logprobs.has_value());
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
}

TEST(CompletionRequest, PromptForms) {
  EXPECT_EQ(completion_body(R"({"prompt":""})").prompts[0].text, "");
  const CompletionRequest strings = completion_body(R"({"prompt":["a","b"]})");
  ASSERT_EQ(strings.prompts.size(), 2u);
  EXPECT_EQ(strings.prompts[1].text, "b");
  const CompletionRequest ids = completion_body(R"({"prompt":[1,2,999,3.0]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_FALSE(ids.prompts[0].text.has_value());
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 999, 3}));
  const CompletionRequest lists = completion_body(R"({"prompt":[[1,2],[0]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(lists.prompts[1].ids, (std::vector<int32_t>{0}));
  EXPECT_FALSE(lists.prompts[1].text.has_value());
}

TEST(CompletionRequest, PromptIsRequired) {
  EXPECT_TRUE(is_error(body_error("{}"), "missing_required_parameter", "prompt",
                       "Missing required parameter: 'prompt'."));
  EXPECT_TRUE(is_error(body_error(R"({"prompt":null})"), "missing_required_parameter", "prompt"));
}

TEST(CompletionRequest, PromptTypeErrors) {
  for (const char* prompt : {"5", "true", "{}", "[true]", "[{}]", "[null]"}) {
    EXPECT_TRUE(is_error(prompt_error(prompt), "invalid_type", "prompt", kPromptTypeMessage))
        << prompt;
  }
  EXPECT_TRUE(is_error(prompt_error(R"(["a",1])"), "invalid_type", "prompt[1]",
                       "Invalid type for 'prompt[1]': expected a string."));
  EXPECT_TRUE(is_error(prompt_error(R"([1,"a"])"), "invalid_type", "prompt[1]",
                       "Invalid type for 'prompt[1]': expected an integer."));
  EXPECT_TRUE(is_error(prompt_error("[1.5]"), "invalid_type", "prompt[0]"));
  EXPECT_TRUE(is_error(prompt_error("[[1],2]"), "invalid_type", "prompt[1]",
                       "Invalid type for 'prompt[1]': expected an array."));
  EXPECT_TRUE(is_error(prompt_error("[[1,1.5]]"), "invalid_type", "prompt[0][1]"));
  EXPECT_TRUE(is_error(prompt_error(R"([["a"]])"), "invalid_type", "prompt[0][0]"));
}

TEST(CompletionRequest, PromptValueErrors) {
  EXPECT_TRUE(is_error(prompt_error("[]"), "invalid_value", "prompt",
                       "Invalid value for 'prompt': expected a non-empty array."));
  EXPECT_TRUE(is_error(prompt_error("[1000]"), "invalid_value", "prompt[0]",
                       "Invalid value for 'prompt[0]': expected a token id in [0, 1000)."));
  EXPECT_TRUE(is_error(prompt_error("[5,-1]"), "invalid_value", "prompt[1]"));
  EXPECT_TRUE(is_error(prompt_error("[[1],[2,1000]]"), "invalid_value", "prompt[1][1]"));
  EXPECT_TRUE(is_error(prompt_error("[[1],[]]"), "invalid_value", "prompt[1]",
                       "Invalid value for 'prompt[1]': expected a non-empty array of token ids."));
}

TEST(CompletionRequest, MaxTokensZeroIsAllowedForScoring) {
  const CompletionRequest r = completion(R"("max_tokens":0,"echo":true,"logprobs":1)");
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 1);
  EXPECT_EQ(completion(R"("max_completion_tokens":5,"max_tokens":9)").max_tokens, 5);
  EXPECT_TRUE(is_error(error(R"("max_tokens":-1)"), "invalid_value", "max_tokens",
                       "Invalid value for 'max_tokens': expected an integer between 0 and "
                       "2147483647."));
}

TEST(CompletionRequest, LogprobsIsAnIntegerOrABoolean) {
  EXPECT_EQ(completion(R"("logprobs":true)").logprobs, 1);
  EXPECT_FALSE(completion(R"("logprobs":false)").logprobs.has_value());
  EXPECT_FALSE(completion(R"("logprobs":null)").logprobs.has_value());
  EXPECT_EQ(completion(R"("logprobs":0)").logprobs, 0);
  EXPECT_EQ(completion(R"("logprobs":20)").logprobs, 20);
  EXPECT_EQ(completion(R"("logprobs":3.0)").logprobs, 3);
  EXPECT_TRUE(is_error(error(R"("logprobs":21)"), "invalid_value", "logprobs",
                       "Invalid value for 'logprobs': expected an integer between 0 and 20."));
  EXPECT_TRUE(is_error(error(R"("logprobs":-1)"), "invalid_value", "logprobs"));
  EXPECT_TRUE(is_error(error(R"("logprobs":"3")"), "invalid_type", "logprobs",
                       "Invalid type for 'logprobs': expected an integer or a boolean."));
  EXPECT_TRUE(is_error(error(R"("logprobs":1.5)"), "invalid_type", "logprobs"));
}

TEST(CompletionRequest, BestOfMustEqualN) {
  EXPECT_NO_THROW(completion(R"("best_of":1)"));
  EXPECT_NO_THROW(completion(R"("best_of":3,"n":3)"));
  EXPECT_NO_THROW(completion(R"("best_of":null,"n":3)"));
  EXPECT_TRUE(is_error(error(R"("best_of":2)"), "invalid_value", "best_of",
                       "Invalid value for 'best_of': expected null or equal to 'n'."));
  EXPECT_TRUE(is_error(error(R"("best_of":"1")"), "invalid_type", "best_of"));
}

TEST(CompletionRequest, NonEmptySuffixIsUnsupported) {
  EXPECT_NO_THROW(completion(R"("suffix":"")"));
  EXPECT_NO_THROW(completion(R"("suffix":null)"));
  EXPECT_TRUE(is_error(error(R"("suffix":"tail")"), "unsupported_parameter", "suffix",
                       "Unsupported parameter: 'suffix' is not supported by this server."));
  EXPECT_TRUE(is_error(error(R"("suffix":1)"), "invalid_type", "suffix"));
}

TEST(CompletionRequest, BooleansOfTheCompletionsTable) {
  EXPECT_FALSE(completion(R"("add_special_tokens":false)").add_special_tokens);
  EXPECT_TRUE(is_error(error(R"("add_special_tokens":1)"), "invalid_type", "add_special_tokens"));
  EXPECT_TRUE(is_error(error(R"("echo":"true")"), "invalid_type", "echo"));
}

TEST(CompletionRequest, ChoicesCountPromptsTimesN) {  // §7
  EXPECT_EQ(completion_body(R"({"prompt":["a","b","c","d"],"n":16})").prompts.size(), 4u);
  EXPECT_TRUE(is_error(body_error(R"({"prompt":["a","b","c","d"],"n":20})"), "invalid_value", "n",
                       "Request asks for 80 choices; at most 64 are allowed."));
  Json many = Json::array();
  for (int i = 0; i < 65; ++i) many.push_back("p");
  EXPECT_TRUE(is_error(body_error(R"({"prompt":)" + many.dump() + "}"), "invalid_value", "n",
                       "Request asks for 65 choices; at most 64 are allowed."));
}

TEST(CompletionRequest, SharedRowsApply) {
  const CompletionRequest r = completion(R"("temperature":0,"top_k":5,"seed":-7,"stop":"\n",
      "stop_token_ids":[3],"logit_bias":{"9":1.5},"min_tokens":2,"stream":true,
      "stream_options":{"include_usage":true},"return_token_ids":true,"ignore_eos":true,
      "model":"tiny")");
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_EQ(r.seed, -7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.stop_token_ids, std::vector<int32_t>{3});
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{9, 1.5f}}));
  EXPECT_EQ(r.min_tokens, 2);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.return_token_ids);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_TRUE(is_error(error(R"("temperature":3)"), "invalid_value", "temperature"));
  EXPECT_TRUE(is_error(error(R"("seed":9223372036854775808)"), "invalid_value", "seed"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"abc":1})"), "invalid_value", "logit_bias.abc"));
  EXPECT_TRUE(is_error(error(R"("stop":5)"), "invalid_type", "stop"));
  EXPECT_TRUE(is_error(error(R"("model":"gpt-4")"), "model_not_found", "model"));
}

TEST(CompletionRequest, CrossFieldRules) {
  EXPECT_TRUE(is_error(error(R"("min_tokens":3,"max_tokens":2)"), "invalid_value", "min_tokens",
                       "'min_tokens' must not exceed 'max_tokens'."));
  EXPECT_TRUE(is_error(error(R"("prompt_logprobs":1,"stream":true)"), "invalid_value",
                       "prompt_logprobs", "'prompt_logprobs' cannot be used with 'stream'."));
  EXPECT_EQ(completion(R"("prompt_logprobs":1)").prompt_logprobs, 1);
}

TEST(CompletionRequest, ChatOnlyFieldsAreUnknownHere) {
  EXPECT_NO_THROW(completion(R"("functions":[],
      "tools":5,"messages":"x","top_logprobs":99,"reasoning_effort":"extreme")"));
}

TEST(CompletionRequest, StructuredOutput) {  // §15: response_format and grammar apply here too
  EXPECT_TRUE(completion(R"("response_format":{"type":"json_object"})").grammar.has_value());
  EXPECT_TRUE(completion(R"("grammar":"root ::= [0-9]+")").grammar.has_value());
  EXPECT_TRUE(is_error(error(R"("response_format":{"type":"json_schema"})"),
                       "missing_required_parameter", "response_format.json_schema"));
}

TEST(CompletionRequest, FieldErrorsComeBeforeCrossFieldAndModel) {
  EXPECT_TRUE(
      is_error(body_error(R"({"model":"gpt-4","prompt":[],"n":100})"), "invalid_value", "prompt"));
  EXPECT_TRUE(is_error(error(R"("model":"gpt-4","n":100)"), "invalid_value", "n"));
}

}  // namespace
}  // namespace md::server
