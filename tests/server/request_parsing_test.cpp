// parse_chat_request against docs/openai-api.md §2.2, §2.4, §11 and §12.1, including the
// "Bad input" items 18–31 and the tool_choice item of 60 of the §13 checklist.
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

// A Qwen3.8-style template: chat_template_kwargs.reasoning_effort from a fixed set.
RequestLimits effort_limits() {
  RequestLimits limits = test_limits();
  limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  return limits;
}

constexpr std::string_view kHello = R"("messages":[{"role":"user","content":"hi"}])";

// A valid chat body plus `extra` fields (a JSON object's members, without braces).
std::string with_hello(std::string_view extra) {
  return "{" + std::string(kHello) + (extra.empty() ? "" : ",") + std::string(extra) + "}";
}

ChatRequest chat_body(std::string_view body, const RequestLimits& limits = test_limits()) {
  return parse_chat_request(parse_json_body(body), limits);
}
ChatRequest chat(std::string_view extra, const RequestLimits& limits = test_limits()) {
  return chat_body(with_hello(extra), limits);
}

ApiError body_error(std::string_view body, const RequestLimits& limits = test_limits()) {
  try {
    chat_body(body, limits);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "", std::nullopt, "");
}
ApiError error(std::string_view extra, const RequestLimits& limits = test_limits()) {
  return body_error(with_hello(extra), limits);
}
ApiError messages_error(std::string_view messages) {
  return body_error(R"({"messages":)" + std::string(messages) + "}");
}

// A 400 with this code and param (nullptr: null), and this message when one is given.
testing::AssertionResult is_error(const ApiError& e, std::string_view code, const char* param,
                                  std::string_view message = {}) {
  const bool param_ok = param == nullptr ? !e.param.has_value() : e.param == param;
  if (e.status == 400 && e.type == "invalid_request_error" && e.code == code && param_ok &&
      (message.empty() || e.message == message)) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << "got " << e.body().dump();
}

// Messages as the parser normalises them.
Json messages_of(std::string_view messages) {
  return chat_body(R"({"messages":)" + std::string(messages) + "}").messages;
}

// ---- Defaults and the model field ----

TEST(ChatRequest, MinimalRequestGetsTheDefaults) {
  const ChatRequest r = chat("");
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_EQ(r.messages.dump(), R"([{"role":"user","content":"hi"}])");
  EXPECT_FALSE(r.temperature || r.top_p || r.min_p || r.top_k || r.max_tokens || r.seed);
  EXPECT_FALSE(r.frequency_penalty || r.presence_penalty || r.repetition_penalty);
  EXPECT_FALSE(r.prompt_logprobs.has_value());
  EXPECT_EQ(r.min_tokens, 0);
  EXPECT_EQ(r.n, 1);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_TRUE(r.logit_bias.empty());
  EXPECT_FALSE(r.include_stop_str_in_output || r.ignore_eos || r.stream || r.include_usage);
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_FALSE(r.return_token_ids || r.logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoiceKind::kNone);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_EQ(r.chat_template_kwargs, Json::object());
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
}

TEST(ChatRequest, EveryFieldIsRead) {
  const ChatRequest r = chat(R"(
    "model":"tiny","frequency_penalty":-2,"presence_penalty":2,"repetition_penalty":1.1,
    "temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"max_completion_tokens":100,
    "max_tokens":50,"min_tokens":3,"n":2,"stop":["a","","b"],"stop_token_ids":[7,999],
    "include_stop_str_in_output":true,"ignore_eos":true,"skip_special_tokens":false,
    "stream":true,"stream_options":{"include_usage":true,"include_obfuscation":true},
    "seed":-1,"logprobs":true,"top_logprobs":20,"logit_bias":{"5":-100,"999":100},
    "parallel_tool_calls":false,"response_format":{"type":"text"},
    "add_generation_prompt":false,"continue_final_message":true,"return_token_ids":true)");
  EXPECT_EQ(r.model, "tiny-model");
  EXPECT_EQ(r.frequency_penalty, -2);
  EXPECT_EQ(r.presence_penalty, 2);
  // Sampling numbers are read as the floats the engine holds.
  EXPECT_EQ(r.repetition_penalty, 1.1f);
  EXPECT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.min_p, 0.05f);
  EXPECT_EQ(r.max_tokens, 100);  // max_completion_tokens wins
  EXPECT_EQ(r.min_tokens, 3);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{7, 999}));
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.seed, -1);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 20);
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {999, 100.0f}}));
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_TRUE(r.return_token_ids);
}

TEST(ChatRequest, ModelNamesAndAliasesResolveToTheServedId) {  // §13 item 25
  EXPECT_EQ(chat(R"("model":"tiny-model")").model, "tiny-model");
  EXPECT_EQ(chat(R"("model":"tiny")").model, "tiny-model");
  EXPECT_EQ(chat(R"("model":null)").model, "tiny-model");
  EXPECT_TRUE(is_error(error(R"("model":"gpt-4")"), "model_not_found", "model",
                       "The model 'gpt-4' does not exist."));
  EXPECT_TRUE(is_error(error(R"("model":"TINY")"), "model_not_found", "model"));
  EXPECT_TRUE(is_error(error(R"("model":5)"), "invalid_type", "model",
                       "Invalid type for 'model': expected a string."));
}

TEST(ChatRequest, UnknownAndIgnoredFieldsAreIgnored) {  // §13 item 24
  const ChatRequest r = chat_body(R"({"foo":1,"messages":[{"role":"user","content":"hi","foo":1}],
    "user":5,"metadata":"x","store":"yes","service_tier":[],"safety_identifier":1,
    "prompt_cache_key":{},"prompt_cache_retention":2,"verbosity":false,
    "stream_options":{"bar":1},"response_format":{"type":"text","extra":1}})");
  EXPECT_EQ(r.messages.dump(), R"([{"role":"user","content":"hi"}])");
}

TEST(ChatRequest, NullMeansAbsent) {
  const ChatRequest r = chat(R"("temperature":null,"n":null,"stop":null,"stream":null,
    "stream_options":null,"seed":null,"logit_bias":null,"tools":null,"tool_choice":null,
    "response_format":null,"chat_template_kwargs":null,"functions":null,"modalities":null,
    "skip_special_tokens":null,"parallel_tool_calls":null)");
  EXPECT_FALSE(r.temperature.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_TRUE(
      is_error(body_error(R"({"messages":null})"), "missing_required_parameter", "messages"));
}

// ---- Integer, number and boolean fields (§0, §13 items 18–21) ----

TEST(ChatRequest, IntegerFieldsTakeIntegralNumbersOnly) {  // §13 item 18
  EXPECT_TRUE(is_error(error(R"("max_tokens":"10")"), "invalid_type", "max_tokens",
                       "Invalid type for 'max_tokens': expected an integer."));
  EXPECT_TRUE(is_error(error(R"("stream":"true")"), "invalid_type", "stream",
                       "Invalid type for 'stream': expected a boolean."));
  EXPECT_EQ(chat(R"("max_tokens":10.0)").max_tokens, 10);
  EXPECT_EQ(chat(R"("max_tokens":1e1)").max_tokens, 10);
  EXPECT_TRUE(is_error(error(R"("max_tokens":10.5)"), "invalid_type", "max_tokens"));
  EXPECT_TRUE(is_error(error(R"("max_tokens":true)"), "invalid_type", "max_tokens"));
  EXPECT_TRUE(is_error(error(R"("stream":1)"), "invalid_type", "stream"));
  EXPECT_TRUE(is_error(error(R"("n":"2")"), "invalid_type", "n"));
}

TEST(ChatRequest, MaxTokensRange) {  // §13 item 19
  EXPECT_TRUE(
      is_error(error(R"("max_tokens":-1)"), "invalid_value", "max_tokens",
               "Invalid value for 'max_tokens': expected an integer between 0 and 2147483647."));
  EXPECT_TRUE(is_error(error(R"("max_tokens":2147483648)"), "invalid_value", "max_tokens"));
  EXPECT_TRUE(is_error(error(R"("max_completion_tokens":-1)"), "invalid_value",
                       "max_completion_tokens",
                       "Invalid value for 'max_completion_tokens': expected an integer between "
                       "0 and 2147483647."));
  EXPECT_EQ(chat(R"("max_tokens":0)").max_tokens, 0);
  EXPECT_EQ(chat(R"("max_tokens":2147483647)").max_tokens, 2147483647);
  EXPECT_EQ(chat(R"("max_tokens":7)").max_tokens, 7);
  EXPECT_EQ(chat(R"("max_completion_tokens":7)").max_tokens, 7);
  EXPECT_EQ(chat(R"("max_tokens":9,"max_completion_tokens":null)").max_tokens, 9);
}

TEST(ChatRequest, TemperatureRange) {  // §13 item 20
  EXPECT_TRUE(is_error(error(R"("temperature":2.5)"), "invalid_value", "temperature",
                       "Invalid value for 'temperature': expected a number between 0 and 2."));
  EXPECT_TRUE(is_error(error(R"("temperature":-0.1)"), "invalid_value", "temperature"));
  EXPECT_EQ(chat(R"("temperature":0)").temperature, 0.0);
  EXPECT_EQ(chat(R"("temperature":2)").temperature, 2.0);
  EXPECT_TRUE(is_error(error(R"("temperature":true)"), "invalid_type", "temperature",
                       "Invalid type for 'temperature': expected a number."));
  EXPECT_TRUE(is_error(error(R"("temperature":"0.5")"), "invalid_type", "temperature"));
}

TEST(ChatRequest, TopPAndTopLogprobs) {  // §13 item 21
  EXPECT_TRUE(is_error(error(R"("top_p":1.5)"), "invalid_value", "top_p",
                       "Invalid value for 'top_p': expected a number between 0 and 1."));
  EXPECT_TRUE(is_error(error(R"("logprobs":true,"top_logprobs":21)"), "invalid_value",
                       "top_logprobs",
                       "Invalid value for 'top_logprobs': expected an integer between 0 and 20."));
  EXPECT_TRUE(is_error(error(R"("top_logprobs":3)"), "invalid_value", "top_logprobs",
                       "'top_logprobs' requires 'logprobs' to be true."));
  EXPECT_TRUE(
      is_error(error(R"("top_logprobs":3,"logprobs":false)"), "invalid_value", "top_logprobs"));
  EXPECT_EQ(chat(R"("top_logprobs":3,"logprobs":true)").top_logprobs, 3);
  EXPECT_EQ(chat(R"("top_logprobs":0)").top_logprobs, 0);
  EXPECT_TRUE(is_error(error(R"("logprobs":1)"), "invalid_type", "logprobs",
                       "Invalid type for 'logprobs': expected a boolean."));
  EXPECT_EQ(chat(R"("top_p":0)").top_p, 0.0);
}

TEST(ChatRequest, SamplingRanges) {
  EXPECT_TRUE(is_error(error(R"("frequency_penalty":2.01)"), "invalid_value", "frequency_penalty",
                       "Invalid value for 'frequency_penalty': expected a number between -2 and "
                       "2."));
  EXPECT_TRUE(is_error(error(R"("presence_penalty":-3)"), "invalid_value", "presence_penalty"));
  EXPECT_TRUE(is_error(error(R"("repetition_penalty":0)"), "invalid_value", "repetition_penalty",
                       "Invalid value for 'repetition_penalty': expected a number greater than 0 "
                       "and at most 2."));
  EXPECT_TRUE(
      is_error(error(R"("repetition_penalty":2.5)"), "invalid_value", "repetition_penalty"));
  EXPECT_EQ(chat(R"("repetition_penalty":2)").repetition_penalty, 2.0);
  EXPECT_TRUE(is_error(error(R"("top_k":-2)"), "invalid_value", "top_k",
                       "Invalid value for 'top_k': expected an integer >= -1."));
  EXPECT_TRUE(is_error(error(R"("top_k":1.5)"), "invalid_type", "top_k"));
  EXPECT_EQ(chat(R"("top_k":-1)").top_k, -1);
  EXPECT_EQ(chat(R"("top_k":1000000)").top_k, 1000000);
  EXPECT_TRUE(is_error(error(R"("min_p":1.1)"), "invalid_value", "min_p",
                       "Invalid value for 'min_p': expected a number between 0 and 1."));
  EXPECT_TRUE(is_error(error(R"("min_tokens":-1)"), "invalid_value", "min_tokens",
                       "Invalid value for 'min_tokens': expected an integer >= 0."));
  EXPECT_TRUE(is_error(error(R"("prompt_logprobs":21)"), "invalid_value", "prompt_logprobs",
                       "Invalid value for 'prompt_logprobs': expected an integer between 0 and "
                       "20."));
  EXPECT_EQ(chat(R"("prompt_logprobs":0)").prompt_logprobs, 0);
}

TEST(ChatRequest, BooleanFieldsRejectOtherTypes) {
  for (const char* field :
       {"include_stop_str_in_output", "ignore_eos", "skip_special_tokens", "stream", "logprobs",
        "parallel_tool_calls", "enable_thinking", "add_generation_prompt", "continue_final_message",
        "return_token_ids"}) {
    EXPECT_TRUE(is_error(error(fmt::format(R"("{}":0)", field)), "invalid_type", field,
                         fmt::format("Invalid type for '{}': expected a boolean.", field)));
  }
}

TEST(ChatRequest, NAndTheChoicesLimit) {  // §13 item 26
  EXPECT_TRUE(is_error(error(R"("n":0)"), "invalid_value", "n",
                       "Invalid value for 'n': expected an integer between 1 and 128."));
  EXPECT_TRUE(is_error(error(R"("n":1000)"), "invalid_value", "n",
                       "Invalid value for 'n': expected an integer between 1 and 128."));
  EXPECT_TRUE(is_error(error(R"("n":100)"), "invalid_value", "n",
                       "Request asks for 100 choices; at most 64 are allowed."));
  EXPECT_EQ(chat(R"("n":64)").n, 64);
  RequestLimits more = test_limits();
  more.max_choices = 128;
  EXPECT_EQ(chat(R"("n":128)", more).n, 128);
  RequestLimits fewer = test_limits();
  fewer.max_choices = 2;
  EXPECT_TRUE(is_error(error(R"("n":3)", fewer), "invalid_value", "n",
                       "Request asks for 3 choices; at most 2 are allowed."));
}

TEST(ChatRequest, SeedCoversTheInt64Range) {  // §13 item 29
  EXPECT_TRUE(is_error(error(R"("seed":1.5)"), "invalid_type", "seed",
                       "Invalid type for 'seed': expected an integer."));
  EXPECT_TRUE(is_error(error(R"("seed":9223372036854775808)"), "invalid_value", "seed",
                       "Invalid value for 'seed': expected an integer between "
                       "-9223372036854775808 and 9223372036854775807."));
  EXPECT_TRUE(is_error(error(R"("seed":"7")"), "invalid_type", "seed"));
  EXPECT_EQ(chat(R"("seed":-1)").seed, -1);
  EXPECT_EQ(chat(R"("seed":0)").seed, 0);
  EXPECT_EQ(chat(R"("seed":9223372036854775807)").seed, INT64_MAX);
  EXPECT_EQ(chat(R"("seed":-9223372036854775808)").seed, INT64_MIN);
}

// ---- stop, stop_token_ids, logit_bias, stream_options, response_format ----

TEST(ChatRequest, StopStrings) {  // §13 item 28
  EXPECT_TRUE(is_error(error(R"("stop":5)"), "invalid_type", "stop",
                       "Invalid type for 'stop': expected a string or an array of strings."));
  EXPECT_TRUE(is_error(error(R"("stop":{})"), "invalid_type", "stop"));
  Json seventeen = Json::array();
  for (int i = 0; i < 17; ++i) seventeen.push_back(std::to_string(i));
  EXPECT_TRUE(is_error(error(R"("stop":)" + seventeen.dump()), "invalid_value", "stop",
                       "Invalid value for 'stop': expected at most 16 stop strings of at most "
                       "1024 bytes each."));
  seventeen.erase(seventeen.size() - 1);
  EXPECT_EQ(chat(R"("stop":)" + seventeen.dump()).stop.size(), 16u);
  EXPECT_TRUE(is_error(error(R"("stop":["a",1])"), "invalid_type", "stop[1]",
                       "Invalid type for 'stop[1]': expected a string."));
  const std::string long_stop(1025, 'x');
  EXPECT_TRUE(is_error(error(R"("stop":")" + long_stop + "\""), "invalid_value", "stop"));
  EXPECT_TRUE(is_error(error(R"("stop":["a",")" + long_stop + "\"]"), "invalid_value", "stop[1]",
                       "Invalid value for 'stop[1]': expected at most 16 stop strings of at most "
                       "1024 bytes each."));
  EXPECT_EQ(chat(R"("stop":")" + long_stop.substr(1) + "\"").stop.size(), 1u);
  EXPECT_EQ(chat(R"("stop":"END")").stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(chat(R"("stop":"")").stop.empty());
  EXPECT_TRUE(chat(R"("stop":[])").stop.empty());
  // The byte limit counts bytes, not characters: 342 three-byte characters are 1026 bytes.
  std::string wide;
  for (int i = 0; i < 342; ++i) wide += "\xE4\xB8\xAD";
  EXPECT_TRUE(is_error(error(R"("stop":")" + wide + "\""), "invalid_value", "stop"));
}

TEST(ChatRequest, StopTokenIds) {
  EXPECT_TRUE(is_error(error(R"("stop_token_ids":[1,1000])"), "invalid_value", "stop_token_ids[1]",
                       "Invalid value for 'stop_token_ids[1]': expected token ids in [0, 1000)."));
  EXPECT_TRUE(is_error(error(R"("stop_token_ids":[-1])"), "invalid_value", "stop_token_ids[0]"));
  EXPECT_TRUE(is_error(error(R"("stop_token_ids":["1"])"), "invalid_type", "stop_token_ids[0]",
                       "Invalid type for 'stop_token_ids[0]': expected an integer."));
  EXPECT_TRUE(is_error(error(R"("stop_token_ids":5)"), "invalid_type", "stop_token_ids",
                       "Invalid type for 'stop_token_ids': expected an array."));
  EXPECT_EQ(chat(R"("stop_token_ids":[0,999,5.0])").stop_token_ids,
            (std::vector<int32_t>{0, 999, 5}));
}

TEST(ChatRequest, LogitBias) {  // §13 item 30
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"abc":1})"), "invalid_value", "logit_bias.abc",
                       "Invalid value for 'logit_bias.abc': expected a token id in [0, 1000)."));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"0":101})"), "invalid_value", "logit_bias.0",
                       "Invalid value for 'logit_bias.0': expected a number between -100 and "
                       "100."));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"50256":1})"), "invalid_value", "logit_bias.50256"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"-1":1})"), "invalid_value", "logit_bias.-1"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"1.0":1})"), "invalid_value", "logit_bias.1.0"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"":1})"), "invalid_value", "logit_bias."));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"1":"5"})"), "invalid_type", "logit_bias.1",
                       "Invalid type for 'logit_bias.1': expected a number."));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"1":true})"), "invalid_type", "logit_bias.1"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"1":null})"), "invalid_type", "logit_bias.1"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":{"1":-100.5})"), "invalid_value", "logit_bias.1"));
  EXPECT_TRUE(is_error(error(R"("logit_bias":[1])"), "invalid_type", "logit_bias",
                       "Invalid type for 'logit_bias': expected an object."));
  EXPECT_EQ(chat(R"("logit_bias":{"7":0.5,"3":-1,"007":2})").logit_bias,
            (std::vector<std::pair<int32_t, float>>{{7, 2.0f}, {3, -1.0f}}));
  EXPECT_TRUE(chat(R"("logit_bias":{})").logit_bias.empty());
}

TEST(ChatRequest, LogitBiasHoldsAtMost1024Entries) {
  RequestLimits big = test_limits();
  big.vocab_size = 5000;
  Json bias = Json::object();
  for (int i = 0; i < 1024; ++i) bias[std::to_string(i)] = 1;
  EXPECT_EQ(chat(R"("logit_bias":)" + bias.dump(), big).logit_bias.size(), 1024u);
  bias["1024"] = 1;
  EXPECT_TRUE(is_error(error(R"("logit_bias":)" + bias.dump(), big), "invalid_value", "logit_bias",
                       "Invalid value for 'logit_bias': expected at most 1024 "
                       "entries."));
}

TEST(ChatRequest, StreamOptions) {  // §13 item 32
  EXPECT_FALSE(chat(R"("stream_options":{"include_usage":true})").include_usage);
  EXPECT_FALSE(chat(R"("stream":false,"stream_options":{"include_usage":true})").include_usage);
  EXPECT_TRUE(chat(R"("stream":true,"stream_options":{"include_usage":true})").include_usage);
  EXPECT_FALSE(chat(R"("stream":true,"stream_options":{})").include_usage);
  EXPECT_TRUE(is_error(error(R"("stream_options":{"include_usage":"yes"})"), "invalid_type",
                       "stream_options.include_usage",
                       "Invalid type for 'stream_options.include_usage': expected a boolean."));
  EXPECT_TRUE(is_error(error(R"("stream_options":true)"), "invalid_type", "stream_options"));
  EXPECT_NO_THROW(chat(R"("stream_options":{"include_obfuscation":"whatever"})"));
}

TEST(ChatRequest, ResponseFormat) {  // §13 item 31, §15
  const ChatRequest schema = chat(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
         "schema":{"type":"object","properties":{"n":{"type":"integer","maximum":9}},
                   "required":["n"]}}})");
  ASSERT_TRUE(schema.grammar.has_value());
  EXPECT_NE(schema.grammar->find("root ::="), std::string::npos);
  EXPECT_NE(schema.grammar->find("\"\\\"n\\\"\""), std::string::npos);  // the member "n"
  EXPECT_EQ(schema.grammar_param, "response_format.json_schema.schema");
  const ChatRequest object = chat(R"("response_format":{"type":"json_object"})");
  ASSERT_TRUE(object.grammar.has_value());
  EXPECT_NE(object.grammar->find("root ::= jobject"), std::string::npos);
  EXPECT_FALSE(chat(R"("response_format":{"type":"text"})").grammar.has_value());
  EXPECT_FALSE(chat("").grammar.has_value());
  EXPECT_TRUE(is_error(
      error(R"("response_format":{"type":"json_schema","json_schema":{"schema":{"allOf":[]}}})"),
      "invalid_value", "response_format.json_schema.schema",
      "JSON schema keyword 'allOf' at #: not supported by structured output"));
  EXPECT_TRUE(is_error(error(R"("response_format":{"type":"json_schema"})"),
                       "missing_required_parameter", "response_format.json_schema"));
  EXPECT_TRUE(
      is_error(error(R"("response_format":{"type":"json_schema","json_schema":{"schema":5}})"),
               "invalid_type", "response_format.json_schema.schema"));
  EXPECT_TRUE(
      is_error(error(R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})"),
               "invalid_value", "grammar"));
  EXPECT_TRUE(is_error(error(R"("grammar":5)"), "invalid_type", "grammar"));
  EXPECT_EQ(*chat(R"("grammar":"root ::= \"a\"")").grammar, "root ::= \"a\"");
  EXPECT_TRUE(is_error(error(R"("response_format":{"type":"xml"})"), "invalid_value",
                       "response_format.type",
                       "Invalid value for 'response_format.type': expected one of 'text', "
                       "'json_object', 'json_schema'."));
  EXPECT_TRUE(is_error(error(R"("response_format":{})"), "missing_required_parameter",
                       "response_format.type"));
  EXPECT_TRUE(
      is_error(error(R"("response_format":{"type":1})"), "invalid_type", "response_format.type"));
  EXPECT_TRUE(is_error(error(R"("response_format":"text")"), "invalid_type", "response_format",
                       "Invalid type for 'response_format': expected an object."));
}

TEST(ChatRequest, UnsupportedOpenAiFeatures) {
  for (const char* field :
       {"functions", "function_call", "audio", "prediction", "web_search_options"}) {
    EXPECT_TRUE(is_error(
        error(fmt::format(R"("{}":{{}})", field)), "unsupported_parameter", field,
        fmt::format("Unsupported parameter: '{}' is not supported by this server.", field)));
    EXPECT_NO_THROW(chat(fmt::format(R"("{}":null)", field)));
  }
  EXPECT_TRUE(
      is_error(error(R"("function_call":"auto")"), "unsupported_parameter", "function_call"));
  EXPECT_NO_THROW(chat(R"("modalities":["text"])"));
  EXPECT_TRUE(is_error(error(R"("modalities":["text","audio"])"), "unsupported_value", "modalities",
                       "Unsupported value for 'modalities': [\"text\",\"audio\"] is not supported "
                       "by this server."));
  EXPECT_TRUE(is_error(error(R"("modalities":"text")"), "unsupported_value", "modalities"));
  EXPECT_TRUE(is_error(error(R"("modalities":[])"), "unsupported_value", "modalities"));
}

// ---- Messages (§2.4, §13 items 22–23) ----

TEST(ChatMessages, MessagesIsARequiredNonEmptyArray) {  // §13 item 22
  EXPECT_TRUE(is_error(body_error(R"({"messages":[]})"), "invalid_value", "messages",
                       "Invalid value for 'messages': expected a non-empty array of messages."));
  EXPECT_TRUE(is_error(body_error(R"({"model":"tiny"})"), "missing_required_parameter", "messages",
                       "Missing required parameter: 'messages'."));
  EXPECT_TRUE(is_error(body_error(R"({"messages":"hi"})"), "invalid_type", "messages",
                       "Invalid type for 'messages': expected an array."));
  EXPECT_TRUE(is_error(body_error(R"({"messages":{"role":"user"}})"), "invalid_type", "messages"));
}

TEST(ChatMessages, AtMostMaxMessages) {
  RequestLimits two = test_limits();
  two.max_messages = 2;
  const std::string m = R"({"role":"user","content":"x"})";
  EXPECT_NO_THROW(chat_body(R"({"messages":[)" + m + "," + m + "]}", two));
  EXPECT_TRUE(is_error(body_error(R"({"messages":[)" + m + "," + m + "," + m + "]}", two),
                       "invalid_value", "messages",
                       "Invalid value for 'messages': expected at most 2 messages."));
}

TEST(ChatMessages, EachMessageIsAnObjectWithARole) {  // §13 item 23
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":"a"},"b"])"), "invalid_type",
                       "messages[1]", "Invalid type for 'messages[1]': expected an object."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"wizard","content":"a"}])"), "invalid_value",
                       "messages[0].role",
                       "Invalid value for 'messages[0].role': expected one of 'system', "
                       "'developer', 'user', 'assistant', 'tool'."));
  EXPECT_TRUE(is_error(messages_error(R"([{"content":"a"}])"), "missing_required_parameter",
                       "messages[0].role", "Missing required parameter: 'messages[0].role'."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":null,"content":"a"}])"),
                       "missing_required_parameter", "messages[0].role"));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":1,"content":"a"}])"), "invalid_type",
                       "messages[0].role"));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"User","content":"a"}])"), "invalid_value",
                       "messages[0].role"));
}

TEST(ChatMessages, ContentForms) {
  EXPECT_EQ(messages_of(R"([{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b","extra":1}]}])")
                .dump(),
            R"([{"role":"user","content":"ab"}])");
  EXPECT_EQ(messages_of(R"([{"role":"user","content":[]}])").dump(),
            R"([{"role":"user","content":""}])");
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":5}])"), "invalid_type",
                       "messages[0].content",
                       "Invalid type for 'messages[0].content': expected a string or an array of "
                       "content parts."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":{"type":"text"}}])"),
                       "invalid_type", "messages[0].content"));
  for (const char* role : {"system", "developer", "user", "tool"}) {
    EXPECT_TRUE(is_error(messages_error(fmt::format(R"([{{"role":"{}"}}])", role)),
                         "missing_required_parameter", "messages[0].content",
                         "Missing required parameter: 'messages[0].content'."));
    EXPECT_TRUE(is_error(messages_error(fmt::format(R"([{{"role":"{}","content":null}}])", role)),
                         "missing_required_parameter", "messages[0].content"));
  }
  EXPECT_EQ(messages_of(R"([{"role":"assistant","content":null}])").dump(),
            R"([{"role":"assistant","content":""}])");
  EXPECT_EQ(messages_of(R"([{"role":"assistant"}])").dump(),
            R"([{"role":"assistant","content":""}])");
}

TEST(ChatMessages, OnlyTextPartsAreSupported) {  // §13 item 23
  EXPECT_TRUE(is_error(
      messages_error(R"([{"role":"user","content":[{"type":"text","text":"a"},
          {"type":"image_url","image_url":{"url":"http://x/y.png"}}]}])"),
      "unsupported_value", "messages[0].content[1].type",
      "Unsupported value for 'messages[0].content[1].type': \"image_url\" is not supported by "
      "this server."));
  for (const char* type : {"input_audio", "file", "refusal", "banana"}) {
    EXPECT_TRUE(is_error(
        messages_error(fmt::format(R"([{{"role":"user","content":[{{"type":"{}"}}]}}])", type)),
        "unsupported_value", "messages[0].content[0].type"));
  }
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":["a"]}])"), "invalid_type",
                       "messages[0].content[0]",
                       "Invalid type for 'messages[0].content[0]': expected an object."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":[{"text":"a"}]}])"),
                       "missing_required_parameter", "messages[0].content[0].type"));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":[{"type":5}]}])"),
                       "invalid_type", "messages[0].content[0].type"));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":[{"type":"text"}]}])"),
                       "missing_required_parameter", "messages[0].content[0].text"));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"user","content":[{"type":"text","text":1}]}])"),
                       "invalid_type", "messages[0].content[0].text"));
}

TEST(ChatMessages, DeveloperBecomesSystemAndUnknownKeysAreDropped) {
  EXPECT_EQ(messages_of(R"([{"role":"developer","content":"rules","foo":1},
      {"role":"system","content":"s","name":"x"},{"role":"user","content":"u","name":"bob"}])")
                .dump(),
            R"([{"role":"system","content":"rules"},{"role":"system","content":"s"},)"
            R"({"role":"user","content":"u"}])");
}

TEST(ChatMessages, AssistantToolCallsAreNormalised) {
  const Json m = messages_of(R"([{"role":"user","content":"q"},{"role":"assistant","content":null,
      "tool_calls":[
        {"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":[2]}"}},
        {"function":{"arguments":{"z":true,"y":null},"name":"g"},"extra":1}]},
      {"role":"tool","tool_call_id":"call_1","name":"f","content":"42","foo":1}])");
  EXPECT_EQ(
      m[1].dump(),
      R"({"role":"assistant","content":"","tool_calls":[)"
      R"({"id":"call_1","type":"function","function":{"name":"f","arguments":{"b":1,"a":[2]}}},)"
      R"({"type":"function","function":{"name":"g","arguments":{"z":true,"y":null}}}]})");
  EXPECT_EQ(m[2].dump(), R"({"role":"tool","content":"42","tool_call_id":"call_1","name":"f"})");
  EXPECT_EQ(messages_of(R"([{"role":"assistant","content":"x","tool_calls":[]}])").dump(),
            R"([{"role":"assistant","content":"x"}])");
  EXPECT_EQ(messages_of(R"([{"role":"tool","content":"x"}])").dump(),
            R"([{"role":"tool","content":"x"}])");
}

TEST(ChatMessages, ToolCallArgumentsMustHoldAnObject) {
  const std::string message =
      "Invalid value for 'messages[0].tool_calls[0].function.arguments': expected a JSON object "
      "or a string holding one.";
  for (const char* arguments :
       {R"("not json")", R"("[1,2]")", R"("\"s\"")", R"("")", R"("{\"a\":1} x")"}) {
    EXPECT_TRUE(is_error(
        messages_error(fmt::format(R"([{{"role":"assistant","tool_calls":[{{"type":"function",)"
                                   R"("function":{{"name":"f","arguments":{}}}}}]}}])",
                                   arguments)),
        "invalid_value", "messages[0].tool_calls[0].function.arguments", message))
        << arguments;
  }
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"assistant","tool_calls":[{"type":"function",
                           "function":{"name":"f","arguments":[1]}}]}])"),
                       "invalid_type", "messages[0].tool_calls[0].function.arguments",
                       "Invalid type for 'messages[0].tool_calls[0].function.arguments': expected "
                       "a string or an object."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"assistant","tool_calls":[{"type":"function",
                           "function":{"name":"f"}}]}])"),
                       "missing_required_parameter",
                       "messages[0].tool_calls[0].function.arguments"));
}

TEST(ChatMessages, ToolCallShape) {
  const auto call = [](std::string_view tool_call) {
    return messages_error(fmt::format(R"([{{"role":"assistant","tool_calls":[{}]}}])", tool_call));
  };
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"assistant","tool_calls":{}}])"), "invalid_type",
                       "messages[0].tool_calls"));
  EXPECT_TRUE(is_error(call("1"), "invalid_type", "messages[0].tool_calls[0]"));
  EXPECT_TRUE(is_error(call(R"({"type":"function"})"), "missing_required_parameter",
                       "messages[0].tool_calls[0].function"));
  EXPECT_TRUE(is_error(call(R"({"function":{"arguments":"{}"}})"), "missing_required_parameter",
                       "messages[0].tool_calls[0].function.name"));
  EXPECT_TRUE(is_error(call(R"({"function":{"name":1,"arguments":"{}"}})"), "invalid_type",
                       "messages[0].tool_calls[0].function.name"));
  EXPECT_TRUE(is_error(call(R"({"type":"custom","function":{"name":"f","arguments":"{}"}})"),
                       "unsupported_value", "messages[0].tool_calls[0].type"));
  EXPECT_TRUE(is_error(call(R"({"id":1,"function":{"name":"f","arguments":"{}"}})"), "invalid_type",
                       "messages[0].tool_calls[0].id"));
}

TEST(ChatMessages, ReasoningIsAnAliasOfReasoningContent) {
  EXPECT_EQ(messages_of(R"([{"role":"assistant","content":"a","reasoning":"r"}])").dump(),
            R"([{"role":"assistant","content":"a","reasoning_content":"r"}])");
  EXPECT_EQ(messages_of(R"([{"role":"assistant","content":"a","reasoning":"r",
                            "reasoning_content":"rc"}])")
                .dump(),
            R"([{"role":"assistant","content":"a","reasoning_content":"rc"}])");
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"assistant","content":"a","reasoning":5}])"),
                       "invalid_type", "messages[0].reasoning"));
  EXPECT_TRUE(
      is_error(messages_error(R"([{"role":"assistant","content":"a","reasoning_content":[]}])"),
               "invalid_type", "messages[0].reasoning_content"));
}

TEST(ChatMessages, ToolExtrasAreOptionalStrings) {
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"tool","content":"x","tool_call_id":5}])"),
                       "invalid_type", "messages[0].tool_call_id",
                       "Invalid type for 'messages[0].tool_call_id': expected a string."));
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"tool","content":"x","name":{}}])"),
                       "invalid_type", "messages[0].name"));
}

TEST(ChatMessages, ErrorsNameTheIndexOfTheMessage) {
  EXPECT_TRUE(is_error(messages_error(R"([{"role":"system","content":"s"},
      {"role":"user","content":"u"},{"role":"user","content":[{"type":"text","text":7}]}])"),
                       "invalid_type", "messages[2].content[0].text"));
}

// ---- Tools and tool_choice (§12.1, §13 item 60) ----

constexpr std::string_view kWeatherTool =
    R"({"type":"function","function":{"name":"get_weather","description":"Weather now",)"
    R"("parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}},)"
    R"("strict":true}})";

std::string tools_with(std::string_view tool) {
  return R"("tools":[)" + std::string(tool) + "]";
}

TEST(ChatTools, ToolsAreKeptAsReceivedAndDefaultToAuto) {
  const std::string reordered =
      R"({"function":{"parameters":{"z":1,"a":2},"name":"f","x-extra":[1]},"type":"function"})";
  const ChatRequest r = chat(R"("tools":[)" + std::string(kWeatherTool) + "," + reordered + "]");
  EXPECT_EQ(r.tool_choice, ToolChoiceKind::kAuto);
  EXPECT_EQ(r.tools.dump(), "[" + std::string(kWeatherTool) + "," + reordered + "]");
}

TEST(ChatTools, ToolChoiceForms) {
  const std::string tools = tools_with(kWeatherTool);
  EXPECT_EQ(chat(tools + R"(,"tool_choice":"auto")").tool_choice, ToolChoiceKind::kAuto);
  const ChatRequest required = chat(tools + R"(,"tool_choice":"required")");
  EXPECT_EQ(required.tool_choice, ToolChoiceKind::kRequired);
  EXPECT_FALSE(required.tools.is_null());
  const ChatRequest named =
      chat(tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})");
  EXPECT_EQ(named.tool_choice, ToolChoiceKind::kNamed);
  EXPECT_EQ(named.tool_choice_name, "get_weather");
  // With none the tools are neither rendered nor parsed.
  const ChatRequest none = chat(tools + R"(,"tool_choice":"none")");
  EXPECT_EQ(none.tool_choice, ToolChoiceKind::kNone);
  EXPECT_TRUE(none.tools.is_null());
  EXPECT_EQ(chat(R"("tool_choice":"none")").tool_choice, ToolChoiceKind::kNone);
}

TEST(ChatTools, ToolChoiceCrossFieldRules) {
  EXPECT_TRUE(is_error(error(R"("tool_choice":"auto")"), "invalid_value", "tool_choice",
                       "'tool_choice' requires 'tools'."));
  EXPECT_TRUE(is_error(error(R"("tool_choice":"required")"), "invalid_value", "tool_choice",
                       "'tool_choice' requires 'tools'."));
  // Rule 3 comes before rule 4.
  EXPECT_TRUE(is_error(error(R"("tool_choice":{"type":"function","function":{"name":"x"}})"),
                       "invalid_value", "tool_choice", "'tool_choice' requires 'tools'."));
  EXPECT_TRUE(is_error(error(R"("tools":[],"tool_choice":"auto")"), "invalid_value", "tool_choice",
                       "'tool_choice' requires 'tools'."));
  EXPECT_TRUE(is_error(error(tools_with(kWeatherTool) +
                             R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})"),
                       "invalid_value", "tool_choice",
                       "'tool_choice' names function 'nope', which is not in 'tools'."));
}

TEST(ChatTools, ToolChoiceShape) {
  const std::string tools = tools_with(kWeatherTool) + ",";
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":"sometimes")"), "invalid_value",
                       "tool_choice",
                       "Invalid value for 'tool_choice': expected one of 'none', 'auto', "
                       "'required'."));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":5)"), "invalid_type", "tool_choice",
                       "Invalid type for 'tool_choice': expected a string or an object."));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":{"function":{"name":"get_weather"}})"),
                       "missing_required_parameter", "tool_choice.type"));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":{"type":"allowed_tools","function":{}})"),
                       "unsupported_value", "tool_choice.type"));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":{"type":"function"})"),
                       "missing_required_parameter", "tool_choice.function"));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":{"type":"function","function":[]})"),
                       "invalid_type", "tool_choice.function"));
  EXPECT_TRUE(is_error(error(tools + R"("tool_choice":{"type":"function","function":{}})"),
                       "missing_required_parameter", "tool_choice.function.name"));
}

TEST(ChatTools, EmptyToolsAreNoTools) {
  const ChatRequest r = chat(R"("tools":[])");
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoiceKind::kNone);
}

TEST(ChatTools, ToolShape) {
  EXPECT_TRUE(is_error(error(R"("tools":{})"), "invalid_type", "tools",
                       "Invalid type for 'tools': expected an array."));
  EXPECT_TRUE(is_error(error(R"("tools":[1])"), "invalid_type", "tools[0]"));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":"retrieval","function":{"name":"f"}})")),
                       "unsupported_value", "tools[0].type",
                       "Unsupported value for 'tools[0].type': \"retrieval\" is not supported by "
                       "this server."));
  EXPECT_TRUE(is_error(error(tools_with(R"({"function":{"name":"f"}})")),
                       "missing_required_parameter", "tools[0].type"));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":1,"function":{"name":"f"}})")), "invalid_type",
                       "tools[0].type"));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":"function"})")), "missing_required_parameter",
                       "tools[0].function", "Missing required parameter: 'tools[0].function'."));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":"function","function":"f"})")), "invalid_type",
                       "tools[0].function"));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":"function","function":{}})")),
                       "missing_required_parameter", "tools[0].function.name"));
  EXPECT_TRUE(is_error(error(tools_with(R"({"type":"function","function":{"name":1}})")),
                       "invalid_type", "tools[0].function.name"));
  EXPECT_TRUE(is_error(
      error(tools_with(R"({"type":"function","function":{"name":"f","parameters":"{}"}})")),
      "invalid_type", "tools[0].function.parameters",
      "Invalid type for 'tools[0].function.parameters': expected an object."));
  EXPECT_TRUE(
      is_error(error(tools_with(R"({"type":"function","function":{"name":"f","description":1}})")),
               "invalid_type", "tools[0].function.description"));
  EXPECT_NO_THROW(chat(tools_with(
      R"({"type":"function","function":{"name":"f","strict":"ignored","parameters":null}})")));
}

TEST(ChatTools, FunctionNames) {
  const auto named = [](std::string_view name) {
    return tools_with(fmt::format(R"({{"type":"function","function":{{"name":"{}"}}}})", name));
  };
  EXPECT_NO_THROW(chat(named("a-b_C9")));
  EXPECT_NO_THROW(chat(named(std::string(64, 'x'))));
  for (const std::string& bad : {std::string(""), std::string("get weather"), std::string(65, 'x'),
                                 std::string("a.b"), std::string("\xC3\xA9")}) {
    EXPECT_TRUE(is_error(error(named(bad)), "invalid_value", "tools[0].function.name",
                         "Invalid value for 'tools[0].function.name': expected 1 to 64 "
                         "characters from A-Z, a-z, 0-9, '_' and '-'."))
        << bad;
  }
}

TEST(ChatTools, NamesMustBeUniqueAndToolsAtMost128) {
  const std::string f = R"({"type":"function","function":{"name":"f"}})";
  EXPECT_TRUE(is_error(error(R"("tools":[)" + f + "," + f + "]"), "invalid_value", "tools",
                       "Invalid value for 'tools': expected unique function names."));
  Json tools = Json::array();
  for (int i = 0; i < 128; ++i) {
    tools.push_back({{"type", "function"}, {"function", {{"name", fmt::format("f{}", i)}}}});
  }
  EXPECT_EQ(chat(R"("tools":)" + tools.dump()).tools.size(), 128u);
  tools.push_back({{"type", "function"}, {"function", {{"name", "g"}}}});
  EXPECT_TRUE(is_error(error(R"("tools":)" + tools.dump()), "invalid_value", "tools",
                       "Invalid value for 'tools': expected at most 128 tools."));
}

TEST(ChatTools, ToolsAreValidatedEvenWithToolChoiceNone) {
  EXPECT_TRUE(is_error(error(R"("tool_choice":"none","tools":[{"type":"function"}])"),
                       "missing_required_parameter", "tools[0].function"));
}

// ---- Reasoning switches (§11) ----

TEST(ChatReasoning, TemplateKwargsPassThroughWithoutNulls) {
  const ChatRequest r =
      chat(R"("chat_template_kwargs":{"enable_thinking":false,"custom":{"b":1,"a":2},"gone":null,
           "reasoning_effort":"anything"})");
  EXPECT_EQ(r.chat_template_kwargs.dump(),
            R"({"enable_thinking":false,"custom":{"b":1,"a":2},"reasoning_effort":"anything"})");
  EXPECT_TRUE(
      is_error(error(R"("chat_template_kwargs":[])"), "invalid_type", "chat_template_kwargs"));
  EXPECT_TRUE(is_error(error(R"("chat_template_kwargs":{"enable_thinking":"no"})"), "invalid_type",
                       "chat_template_kwargs.enable_thinking",
                       "Invalid type for 'chat_template_kwargs.enable_thinking': expected a "
                       "boolean."));
  EXPECT_TRUE(is_error(error(R"("chat_template_kwargs":{"preserve_thinking":1})"), "invalid_type",
                       "chat_template_kwargs.preserve_thinking"));
}

TEST(ChatReasoning, TemplateEffortIsValidatedAgainstTheTemplatesSet) {  // §13 item 59
  EXPECT_TRUE(
      is_error(error(R"("chat_template_kwargs":{"reasoning_effort":"extreme"})", effort_limits()),
               "invalid_value", "chat_template_kwargs.reasoning_effort",
               "Invalid value for 'chat_template_kwargs.reasoning_effort': expected one "
               "of 'low', 'medium', 'xhigh'."));
  EXPECT_TRUE(
      is_error(error(R"("chat_template_kwargs":{"reasoning_effort":"high"})", effort_limits()),
               "invalid_value", "chat_template_kwargs.reasoning_effort"));
  EXPECT_TRUE(is_error(error(R"("chat_template_kwargs":{"reasoning_effort":3})", effort_limits()),
                       "invalid_type", "chat_template_kwargs.reasoning_effort"));
  EXPECT_EQ(chat(R"("chat_template_kwargs":{"reasoning_effort":"medium"})", effort_limits())
                .chat_template_kwargs.dump(),
            R"({"reasoning_effort":"medium"})");
}

TEST(ChatReasoning, TopLevelEffortIsAnEnum) {
  EXPECT_TRUE(is_error(error(R"("reasoning_effort":"extreme")"), "invalid_value",
                       "reasoning_effort",
                       "Invalid value for 'reasoning_effort': expected one of 'none', 'minimal', "
                       "'low', 'medium', 'high', 'xhigh', 'max'."));
  EXPECT_TRUE(is_error(error(R"("reasoning_effort":1)"), "invalid_type", "reasoning_effort"));
}

TEST(ChatReasoning, TopLevelEffortMapsOntoTheTemplatesSet) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"none", R"({"enable_thinking":false})"},    {"minimal", R"({"reasoning_effort":"low"})"},
      {"low", R"({"reasoning_effort":"low"})"},    {"medium", R"({"reasoning_effort":"medium"})"},
      {"high", R"({"reasoning_effort":"xhigh"})"}, {"xhigh", R"({"reasoning_effort":"xhigh"})"},
      {"max", R"({"reasoning_effort":"xhigh"})"}};
  for (const auto& [effort, kwargs] : cases) {
    EXPECT_EQ(chat(fmt::format(R"("reasoning_effort":"{}")", effort), effort_limits())
                  .chat_template_kwargs.dump(),
              kwargs)
        << effort;
  }
}

TEST(ChatReasoning, WithoutAnEffortVariableOnlyNoneHasAnEffect) {
  EXPECT_EQ(chat(R"("reasoning_effort":"none")").chat_template_kwargs.dump(),
            R"({"enable_thinking":false})");
  for (const char* effort : {"minimal", "low", "medium", "high", "xhigh", "max"}) {
    EXPECT_EQ(chat(fmt::format(R"("reasoning_effort":"{}")", effort)).chat_template_kwargs,
              Json::object())
        << effort;
  }
}

TEST(ChatReasoning, KwargsWinOverTopLevelSwitches) {
  EXPECT_EQ(chat(R"("reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low"})",
                 effort_limits())
                .chat_template_kwargs.dump(),
            R"({"reasoning_effort":"low"})");
  EXPECT_EQ(chat(R"("reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true})")
                .chat_template_kwargs.dump(),
            R"({"enable_thinking":true})");
  EXPECT_EQ(chat(R"("enable_thinking":false,"chat_template_kwargs":{"enable_thinking":true})")
                .chat_template_kwargs.dump(),
            R"({"enable_thinking":true})");
  // A null kwarg is absent, so the top-level switch applies.
  EXPECT_EQ(chat(R"("enable_thinking":false,"chat_template_kwargs":{"enable_thinking":null})")
                .chat_template_kwargs.dump(),
            R"({"enable_thinking":false})");
}

TEST(ChatReasoning, EnableThinkingAlias) {
  EXPECT_EQ(chat(R"("enable_thinking":false)").chat_template_kwargs.dump(),
            R"({"enable_thinking":false})");
  EXPECT_EQ(chat(R"("enable_thinking":true)").chat_template_kwargs.dump(),
            R"({"enable_thinking":true})");
  // The alias is merged before reasoning_effort's mapping, which then leaves the key alone.
  EXPECT_EQ(chat(R"("enable_thinking":true,"reasoning_effort":"none")").chat_template_kwargs.dump(),
            R"({"enable_thinking":true})");
  EXPECT_EQ(chat(R"("enable_thinking":true,"reasoning_effort":"low")", effort_limits())
                .chat_template_kwargs.dump(),
            R"({"enable_thinking":true,"reasoning_effort":"low"})");
}

TEST(ChatReasoning, MappingSkipsValuesTheTemplateLacks) {
  RequestLimits other = test_limits();
  other.reasoning_effort_values = std::vector<std::string>{"low", "high"};
  EXPECT_EQ(chat(R"("reasoning_effort":"minimal")", other).chat_template_kwargs.dump(),
            R"({"reasoning_effort":"low"})");
  EXPECT_EQ(chat(R"("reasoning_effort":"max")", other).chat_template_kwargs, Json::object());
}

// ---- Cross-field rules and the order of checks (§2.1, §2.2) ----

TEST(ChatCrossField, MinTokensAgainstAnExplicitMax) {
  EXPECT_TRUE(is_error(error(R"("min_tokens":10,"max_tokens":5)"), "invalid_value", "min_tokens",
                       "'min_tokens' must not exceed 'max_tokens'."));
  EXPECT_TRUE(is_error(error(R"("min_tokens":10,"max_tokens":50,"max_completion_tokens":5)"),
                       "invalid_value", "min_tokens"));
  EXPECT_EQ(chat(R"("min_tokens":10)").min_tokens, 10);
  EXPECT_EQ(chat(R"("min_tokens":5,"max_tokens":5)").min_tokens, 5);
}

TEST(ChatCrossField, GenerationPromptAndContinuation) {
  const std::string message =
      "'add_generation_prompt' and 'continue_final_message' cannot both be true.";
  EXPECT_TRUE(is_error(error(R"("continue_final_message":true)"), "invalid_value",
                       "continue_final_message", message));
  EXPECT_TRUE(is_error(error(R"("continue_final_message":true,"add_generation_prompt":true)"),
                       "invalid_value", "continue_final_message", message));
  EXPECT_NO_THROW(chat(R"("continue_final_message":true,"add_generation_prompt":false)"));
}

TEST(ChatCrossField, PromptLogprobsCannotStream) {
  EXPECT_TRUE(is_error(error(R"("prompt_logprobs":0,"stream":true)"), "invalid_value",
                       "prompt_logprobs", "'prompt_logprobs' cannot be used with 'stream'."));
  EXPECT_NO_THROW(chat(R"("prompt_logprobs":2,"stream":false)"));
}

TEST(ChatCrossField, RulesRunInTheirListedOrder) {
  // 1 before 2 before 3 before 5 before 6 before 7.
  std::string body = R"("top_logprobs":1,"min_tokens":9,"max_tokens":1,"tool_choice":"auto",)"
                     R"("continue_final_message":true,"prompt_logprobs":1,"stream":true,"n":100)";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "top_logprobs"));
  body += R"(,"logprobs":true)";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "min_tokens"));
  body += R"(,"min_tokens":0)";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "tool_choice"));
  body += R"(,"tool_choice":"none")";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "continue_final_message"));
  body += R"(,"continue_final_message":false)";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "prompt_logprobs"));
  body += R"(,"stream":false)";
  EXPECT_TRUE(is_error(error(body), "invalid_value", "n"));
}

TEST(ChatOrder, FieldsInTableOrderThenCrossFieldThenModel) {
  // messages (row 2) before temperature (row 6) before max_tokens (row 11).
  EXPECT_TRUE(is_error(body_error(R"({"max_tokens":-1,"temperature":9,"messages":[]})"),
                       "invalid_value", "messages"));
  EXPECT_TRUE(
      is_error(error(R"("max_tokens":-1,"temperature":9)"), "invalid_value", "temperature"));
  EXPECT_TRUE(is_error(error(R"("stop":5,"max_tokens":"x")"), "invalid_type", "max_tokens"));
  // Field errors before cross-field rules, cross-field rules before the model name.
  EXPECT_TRUE(
      is_error(error(R"("top_logprobs":3,"temperature":9)"), "invalid_value", "temperature"));
  EXPECT_TRUE(is_error(error(R"("model":"gpt-4","n":100)"), "invalid_value", "n"));
  EXPECT_TRUE(is_error(error(R"("model":"gpt-4","seed":1.5)"), "invalid_type", "seed"));
}

}  // namespace
}  // namespace md::server
