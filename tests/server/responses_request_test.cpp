// parse_responses_request against docs/openai-api.md §14: the Responses body turned into the chat
// request the engine runs (messages, tools, limits), errors named in the Responses terms, and
// the conversation a continuation starts from; ResponseStore's capacity and order.
#include "server/responses_request.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/response_store.h"

namespace md::server {
namespace {

RequestLimits test_limits() {
  RequestLimits limits;
  limits.vocab_size = 1000;
  limits.model_names = {"tiny-model"};
  limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  return limits;
}

ResponsesRequest parse(std::string_view body,
                       const ResponseStore& store = ResponseStore(4, 1 << 20)) {
  return parse_responses_request(parse_json_body(body), test_limits(), store);
}

ApiError error(std::string_view body, const ResponseStore& store = ResponseStore(4, 1 << 20)) {
  try {
    parse(body, store);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "", std::nullopt, "");
}

TEST(ResponsesRequest, AStringInputIsOneUserMessageAfterTheInstructions) {
  const ResponsesRequest r =
      parse(R"({"input":"hi","instructions":"be brief","max_output_tokens":7,"stream":true})");
  EXPECT_EQ(r.chat.messages, Json::parse(R"([{"role":"system","content":"be brief"},
                                             {"role":"user","content":"hi"}])"));
  EXPECT_EQ(r.chat.max_tokens, 7);
  EXPECT_TRUE(r.chat.stream);
  EXPECT_EQ(r.chat.n, 1);
  EXPECT_EQ(r.chat.model, "tiny-model");
  // The instructions are not part of what a continuation inherits.
  EXPECT_EQ(r.conversation, Json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.tool_choice, "auto");
}

TEST(ResponsesRequest, ItemsBecomeChatTurns) {
  const ResponsesRequest r = parse(R"({"input":[
      {"role":"developer","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"message","role":"user","content":"q"},
      {"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"let me look"}]},
      {"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"x\":1}"},
      {"type":"function_call","call_id":"call_2","name":"g","arguments":"{}"},
      {"type":"function_call_output","call_id":"call_1","output":"one"},
      {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"two"}]},
      {"type":"reasoning","summary":[{"type":"summary_text","text":"so"}]},
      {"type":"function_call","call_id":"call_3","name":"f","arguments":"{}"}]})");
  // The chat parser's normalisation (developer → system, arguments parsed for the template).
  const Json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "ab");
  EXPECT_EQ(m[1]["content"], "q");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "let me look");
  EXPECT_EQ(m[2]["reasoning_content"], "think");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(m[3]["content"], "one");
  EXPECT_EQ(m[4]["content"], "two");
  // A call after tool results is a new assistant turn, carrying the reasoning before it.
  EXPECT_EQ(m[5]["role"], "assistant");
  EXPECT_EQ(m[5]["reasoning_content"], "so");
  EXPECT_EQ(m[5]["tool_calls"][0]["id"], "call_3");
}

TEST(ResponsesRequest, FunctionToolsAndToolChoiceTakeTheChatForm) {
  const ResponsesRequest r = parse(R"({"input":"hi",
      "tools":[{"type":"function","name":"get_weather","description":"d",
                "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],
      "tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false})");
  EXPECT_EQ(r.chat.tool_choice, ToolChoiceKind::kNamed);
  EXPECT_EQ(r.chat.tool_choice_name, "get_weather");
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.tools[0]["name"], "get_weather") << "echoed as received";
}

TEST(ResponsesRequest, SamplingAndExtensionsPassThrough) {
  const ResponsesRequest r = parse(
      R"({"input":"hi","temperature":0.5,"top_p":0.75,"seed":3,"top_k":4,"reasoning":{"effort":"low"}})");
  EXPECT_EQ(r.chat.temperature, 0.5);
  EXPECT_EQ(r.chat.top_p, 0.75);
  EXPECT_EQ(r.chat.seed, 3);
  EXPECT_EQ(r.chat.top_k, 4);
  EXPECT_EQ(r.chat.chat_template_kwargs["reasoning_effort"], "low");
  EXPECT_EQ(r.reasoning_effort, "low");
}

TEST(ResponsesRequest, PreviousResponseConversationComesFirst) {
  ResponseStore store(4, 1 << 20);
  store.put("resp_1", {Json::object(), Json::parse(R"([{"role":"user","content":"one"},
                                                       {"role":"assistant","content":"two"}])")});
  const ResponsesRequest r =
      parse(R"({"input":"three","previous_response_id":"resp_1","instructions":"i"})", store);
  EXPECT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0]["content"], "i");
  EXPECT_EQ(r.chat.messages[1]["content"], "one");
  EXPECT_EQ(r.chat.messages[3]["content"], "three");
  EXPECT_EQ(r.conversation.size(), 3u);
  const ApiError e = error(R"({"input":"x","previous_response_id":"resp_2"})", store);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "previous_response_id");
  EXPECT_EQ(e.message, "Previous response with id 'resp_2' not found.");
}

TEST(ResponsesRequest, ErrorsNameTheResponsesFields) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "input"},
      {R"({"input":5})", "input"},
      {R"({"input":[{"role":"wizard","content":"x"}]})", "input[0].role"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})",
       "input[0].content[0].type"},
      {R"({"input":[{"type":"item_reference","id":"x"}]})", "input[0].type"},
      {R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})", "input[0].call_id"},
      {R"({"input":"x","max_output_tokens":0})", "max_output_tokens"},
      {R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0].type"},
      {R"({"input":"x","tools":[{"type":"function"}]})", "tools[0].name"},
      {R"({"input":"x","tool_choice":{"type":"function"}})", "tool_choice.name"},
      {R"({"input":"x","text":{"format":{"type":"json_schema","schema":{"not":{}}}}})",
       "text.format.schema"},
      {R"({"input":"x","text":{"format":{"type":"xml"}}})", "text.format.type"},
      {R"({"input":"x","background":true})", "background"},
      {R"({"input":"x","truncation":"auto"})", "truncation"},
      {R"({"input":"x","reasoning":{"effort":"extreme"}})", "reasoning.effort"},
      {R"({"input":"x","temperature":-1})", "temperature"},
      {R"({"input":"x","model":"other"})", "model"},
  };
  for (const Case& c : cases) {
    const ApiError e = error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_EQ(e.message.find("messages"), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find("max_completion_tokens"), std::string::npos) << e.message;
  }
}

TEST(ResponseStore, KeepsTheNewestWithinItsCapacity) {
  ResponseStore store(2, 1 << 20);
  store.put("a", {Json(1), Json::array()});
  store.put("b", {Json(2), Json::array()});
  store.put("c", {Json(3), Json::array()});
  EXPECT_FALSE(store.get("a"));
  EXPECT_EQ(store.get("b")->response, 2);
  EXPECT_EQ(store.get("c")->response, 3);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.erase("b"));
  EXPECT_FALSE(store.erase("b"));
  store.put("d", {Json(4), Json::array()});
  EXPECT_TRUE(store.get("c")) << "erasing made room: c stays";
  ResponseStore none(0, 1 << 20);
  none.put("a", {Json(1), Json::array()});
  EXPECT_FALSE(none.get("a"));
}

TEST(ResponseStore, KeepsTheNewestWithinItsBytes) {
  // Each entry: a 100-character string response ("…" + quotes) and "[]" = 104 bytes.
  const Json hundred = std::string(100, 'x');
  ResponseStore store(100, 350);
  for (const char* id : {"a", "b", "c", "d"}) store.put(id, {hundred, Json::array()});
  EXPECT_FALSE(store.get("a"));
  EXPECT_TRUE(store.get("b") && store.get("c") && store.get("d"));
  EXPECT_EQ(store.bytes(), 3u * 104u);
  // One entry over the whole budget is not kept, and evicts nothing.
  store.put("big", {std::string(400, 'y'), Json::array()});
  EXPECT_FALSE(store.get("big"));
  EXPECT_EQ(store.size(), 3u);
  // A lookup keeps its entry alive after eviction.
  const std::shared_ptr<const StoredResponse> held = store.get("b");
  store.put("e", {hundred, Json::array()});
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(held->response, hundred);
}

TEST(ResponsesRequest, ReasoningOnlyJoinsTheAssistantTurnRightAfterIt) {
  const ResponsesRequest r = parse(R"({"input":[
      {"type":"reasoning","summary":[{"type":"summary_text","text":"stale"}]},
      {"role":"user","content":"q"},
      {"role":"assistant","content":"a"},
      {"type":"reasoning","content":[{"type":"reasoning_text","text":"r"}]}]})");
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_FALSE(r.chat.messages[1].contains("reasoning_content")) << r.chat.messages.dump();
}

TEST(ResponsesRequest, MetadataWithinOpenAiLimits) {
  EXPECT_EQ(parse(R"({"input":"x","metadata":{"k":"v"}})").metadata, Json::parse(R"({"k":"v"})"));
  std::string many = R"({"input":"x","metadata":{)";
  for (int i = 0; i < 17; ++i)
    many += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":\"v\"";
  many += "}}";
  EXPECT_EQ(error(many).param, "metadata");
  EXPECT_EQ(error(R"({"input":"x","metadata":{"k":1}})").param, "metadata.k");
  const std::string long_value =
      R"({"input":"x","metadata":{"k":")" + std::string(513, 'v') + "\"}}";
  EXPECT_EQ(error(long_value).param, "metadata.k");
}

TEST(ResponsesRequest, ToolErrorsNameTheResponsesPath) {
  const ApiError e =
      error(R"({"input":"x","tools":[{"type":"function","name":"f","parameters":5}]})");
  EXPECT_EQ(e.param, "tools[0].parameters") << e.message;
  EXPECT_EQ(e.message.find(".function"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace md::server
