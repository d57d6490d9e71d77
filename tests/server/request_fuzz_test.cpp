// Mutation fuzzing of the request parsers (JSON body → typed request): structured mutations
// (any value replaced by a value of another type or an extreme one, keys dropped or duplicated)
// and byte mutations of valid seed bodies. Every input must either parse or be refused with an
// ApiError carrying a 4xx status; nothing else may escape (crashes, other exceptions, hangs, and
// under ASan/UBSan any memory or undefined-behaviour error fail the test).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/json_body.h"
#include "server/responses_request.h"

namespace md::server {
namespace {

using json = nlohmann::ordered_json;

const char* kSeeds[] = {
    R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"temperature":0.5,"top_p":0.9,"top_k":5,"min_p":0.1,"max_tokens":10,"n":2,"stop":["x","y"],"seed":-3,"logprobs":true,"top_logprobs":2,"logit_bias":{"5":1.5},"stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"low"},"reasoning_effort":"high","response_format":{"type":"text"}})",
    R"({"model":"m","prompt":["a","b"],"max_tokens":0,"echo":true,"logprobs":3,"best_of":1,"stop":"z","stop_token_ids":[1,2],"min_tokens":0,"ignore_eos":true,"prompt_logprobs":1,"suffix":""})",
    R"({"prompt":[[1,2,3],[4]],"n":3,"seed":9223372036854775807})",
    R"({"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false,"continue_final_message":true,"return_token_strs":true})",
    R"({"tokens":[0,1,2,511]})",
    R"({"model":"m","instructions":"be brief","previous_response_id":"resp_a","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"reasoning","content":[{"type":"reasoning_text","text":"hm"}],"summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"yes"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},"max_output_tokens":5,"reasoning":{"effort":"low"},"text":{"format":{"type":"text"}},"store":false,"truncation":"disabled","metadata":{"k":"v"},"stream":true})",
};

json random_value(std::mt19937& rng) {
  static const std::vector<json> pool = {nullptr,
                                         true,
                                         false,
                                         0,
                                         -1,
                                         1.5,
                                         1e300,
                                         -1e300,
                                         2147483648LL,
                                         "",
                                         "x",
                                         "10",
                                         json::array(),
                                         json::object(),
                                         json::array({1, "a", nullptr}),
                                         json{{"type", "image_url"}},
                                         json{{"role", "wizard"}},
                                         std::string(2000, 'a'),
                                         "\xc3\xa9",
                                         9223372036854775807LL};
  return pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)];
}

// Replaces, drops or duplicates one randomly chosen node of the document.
void mutate_structure(json& node, std::mt19937& rng, int depth = 0) {
  std::uniform_int_distribution<int> coin(0, 9);
  if ((node.is_object() || node.is_array()) && !node.empty() && depth < 8 && coin(rng) < 7) {
    std::size_t pick = std::uniform_int_distribution<std::size_t>(0, node.size() - 1)(rng);
    auto it = node.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(pick));
    int action = coin(rng);
    if (action == 0) {
      node.erase(it);
    } else if (action == 1 && node.is_object()) {
      node[it.key() + "_extra"] = random_value(rng);
    } else {
      mutate_structure(*it, rng, depth + 1);
    }
    return;
  }
  node = random_value(rng);
}

std::string mutate_bytes(std::string text, std::mt19937& rng) {
  std::uniform_int_distribution<int> action(0, 3);
  std::size_t at =
      text.empty() ? 0 : std::uniform_int_distribution<std::size_t>(0, text.size() - 1)(rng);
  switch (action(rng)) {
    case 0:
      if (!text.empty()) text[at] = static_cast<char>(rng() & 0xFF);
      break;
    case 1:
      text.insert(at, 1, "{}[]\",:\\\xff\x80"[rng() % 11]);
      break;
    case 2:
      text.resize(at);
      break;
    default:
      text.insert(at, R"(\ud800)");
      break;
  }
  return text;
}

// What previous_response_id "resp_a" names.
const ResponseStore& stored_responses() {
  static ResponseStore store(4, 1 << 20);
  static const bool filled = [] {
    store.put("resp_a", {json::object(), json::array({json{{"role", "user"}, {"content", "x"}}})});
    return true;
  }();
  (void)filled;
  return store;
}

void parse_all_ways(const std::string& body, const RequestLimits& limits) {
  try {
    json parsed = parse_json_body(body);
    for (int route = 0; route < 5; ++route) {
      try {
        switch (route) {
          case 0:
            (void)parse_chat_request(parsed, limits);
            break;
          case 1:
            (void)parse_completion_request(parsed, limits);
            break;
          case 2:
            (void)parse_tokenize_request(parsed, limits);
            break;
          case 3:
            (void)parse_responses_request(parsed, limits, stored_responses());
            break;
          default:
            (void)parse_detokenize_request(parsed, limits);
            break;
        }
      } catch (const ApiError& e) {
        ASSERT_GE(e.status, 400) << body;
        ASSERT_LT(e.status, 500) << body;
        ASSERT_FALSE(e.message.empty());
      }
    }
  } catch (const ApiError& e) {
    ASSERT_EQ(e.status, 400) << body;
  }
}

TEST(RequestFuzz, MutatedBodiesParseOrGiveAClientError) {
  RequestLimits limits;
  limits.vocab_size = 512;
  limits.model_names = {"m"};
  limits.reasoning_effort_values = std::vector<std::string>{"low", "medium", "xhigh"};
  std::mt19937 rng(20261201);
  int iterations = 0;
  for (const char* seed : kSeeds) {
    json base = json::parse(seed);
    parse_all_ways(seed, limits);
    for (int i = 0; i < 3000; ++i, ++iterations) {
      json doc = base;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) mutate_structure(doc, rng);
      std::string body = doc.dump();
      if (rng() % 4 == 0) body = mutate_bytes(body, rng);
      parse_all_ways(body, limits);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_EQ(iterations, 18000);
}

TEST(RequestFuzz, DeepNestingIsRefusedNotACrash) {
  RequestLimits limits;
  limits.vocab_size = 512;
  limits.model_names = {"m"};
  std::string deep = R"({"messages":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THROW(parse_json_body(deep), ApiError);
}

}  // namespace
}  // namespace md::server
