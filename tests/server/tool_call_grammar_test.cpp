// The tool-call grammar (§12.5) against the parser that reads the calls back (§12.2): what the
// grammar allows parses into calls whose arguments follow the schema.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/json_body.h"
#include "text/grammar/gbnf_parser.h"
#include "text/grammar/grammar_automaton.h"

namespace md::server {
namespace {

using Json = nlohmann::ordered_json;

RequestLimits limits() {
  RequestLimits l;
  l.vocab_size = 1000;
  l.model_names = {"m"};
  return l;
}

ChatRequest request(const std::string& tool_choice, bool strict, bool parallel = true) {
  std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],
    "parallel_tool_calls":)" +
                     std::string(parallel ? "true" : "false") + R"(,
    "tool_choice":)" +
                     tool_choice + R"(,
    "tools":[{"type":"function","function":{"name":"get_weather","strict":)" +
                     (strict ? "true" : "false") + R"(,
      "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8},
        "days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["c","f"]}},
        "required":["city","days"]}}},
      {"type":"function","function":{"name":"now","parameters":{"type":"object"}}}]})";
  return parse_chat_request(parse_json_body(body), limits());
}

bool accepts(const ToolCallGrammar& g, const std::string& text) {
  grammar::GrammarAutomaton automaton(grammar::parse_gbnf(g.gbnf));
  auto state = automaton.step(automaton.start(), text);
  return state != grammar::GrammarAutomaton::kDead && automaton.accepting(state);
}

TEST(ToolCallGrammar, RequiredJsonCallsFollowTheSchema) {
  auto g = tool_call_grammar(request(R"("required")", true), ToolCallFormat::kJson);
  ASSERT_TRUE(g && !g->lazy);
  // The prompt already ends with "<tool_call>\n".
  EXPECT_TRUE(accepts(*g, R"({"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}})"
                          "\n</tool_call>"));
  EXPECT_TRUE(accepts(*g, R"({"name":"now","arguments":{}})"
                          "\n</tool_call>\n<tool_call>\n"
                          R"({"name":"get_weather","arguments":{"city":"","days":7,"unit":"f"}})"
                          "\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, R"({"name":"get_weather","arguments":{"city":"Oslo","days":9}})"
                           "\n</tool_call>"));  // days out of range
  EXPECT_FALSE(accepts(*g, R"({"name":"get_weather","arguments":{"days":3}})"
                           "\n</tool_call>"));  // city is required
  EXPECT_FALSE(accepts(*g, R"({"name":"other","arguments":{}})"
                           "\n</tool_call>"));  // not a tool
  // Inside a call, '<' in a string only as \u003c: the parser ends a call at "</tool_call>".
  EXPECT_FALSE(accepts(*g, R"({"name":"get_weather","arguments":{"city":"</tool_call>","days":1}})"
                           "\n</tool_call>"));
  EXPECT_TRUE(accepts(*g, R"({"name":"get_weather","arguments":{"city":"\u003c/a>","days":1}})"
                          "\n</tool_call>"));
  auto single = tool_call_grammar(request(R"("required")", true, false), ToolCallFormat::kJson);
  EXPECT_FALSE(accepts(*single, R"({"name":"now","arguments":{}})"
                                "\n</tool_call>\n<tool_call>\n"
                                R"({"name":"now","arguments":{}})"
                                "\n</tool_call>"));  // parallel calls off
}

TEST(ToolCallGrammar, NamedXmlCallsFollowTheSchemaAndTheParserReadsThemBack) {
  auto g =
      tool_call_grammar(request(R"({"type":"function","function":{"name":"get_weather"}})", true),
                        ToolCallFormat::kXml);
  ASSERT_TRUE(g && !g->lazy);
  // The prompt already ends with "<tool_call>\n<function=get_weather>\n".
  std::string call =
      "<parameter=city>\nSan Jose\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
      "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>";
  ASSERT_TRUE(accepts(*g, call));
  auto whole = parse_tool_calls("<tool_call>\n<function=get_weather>\n" + call,
                                request(R"("auto")", true).tools);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].arguments, R"({"city":"San Jose","days":2,"unit":"c"})");
  EXPECT_FALSE(accepts(*g,
                       "<parameter=city>\nnull\n</parameter>\n<parameter=days>\n2\n"
                       "</parameter>\n</function>\n</tool_call>"));  // would read as null
  for (const char* near_null : {" null", "null ", "\tnull"}) {       // trimmed, these read as null
    EXPECT_FALSE(accepts(*g, std::string("<parameter=city>\n") + near_null +
                                 "\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>"
                                 "\n</tool_call>"))
        << near_null;
  }
  for (const char* text : {"nul", "nullx", "n", "", "nu ll"}) {  // kept as text: allowed
    EXPECT_TRUE(accepts(*g, std::string("<parameter=city>\n") + text +
                                "\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>"
                                "\n</tool_call>"))
        << text;
  }
  EXPECT_FALSE(accepts(*g,
                       "<parameter=city>\n123456789\n</parameter>\n<parameter=days>\n2\n"
                       "</parameter>\n</function>\n</tool_call>"));  // maxLength 8
  EXPECT_FALSE(accepts(*g,
                       "<parameter=city>\na<b\n</parameter>\n<parameter=days>\n2\n"
                       "</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"));
}

TEST(ToolCallGrammar, AutoIsLazyOnlyWithAStrictTool) {
  auto lazy = tool_call_grammar(request(R"("auto")", true), ToolCallFormat::kJson);
  ASSERT_TRUE(lazy && lazy->lazy);
  // From the model's <tool_call> token: the rest of one call.
  EXPECT_TRUE(accepts(*lazy,
                      "\n"
                      R"({"name":"now","arguments":{"x":[1]}})"
                      "\n</tool_call>"));
  EXPECT_FALSE(tool_call_grammar(request(R"("auto")", false), ToolCallFormat::kJson));
  EXPECT_FALSE(tool_call_grammar(request(R"("required")", false), ToolCallFormat::kJson));
  // A named function that is not strict: not constrained, even beside a strict one.
  EXPECT_FALSE(tool_call_grammar(request(R"({"type":"function","function":{"name":"now"}})", true),
                                 ToolCallFormat::kJson));
  EXPECT_FALSE(tool_call_grammar(request(R"("none")", true), ToolCallFormat::kJson));
}

TEST(ToolCallGrammar, AStrictSchemaStructuredOutputCannotHonourIsRefused) {
  std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],
    "tool_choice":"required","tools":[{"type":"function","function":{"name":"f","strict":true,
    "parameters":{"type":"object","properties":{"a":{"allOf":[]}}}}}]})";
  ChatRequest r = parse_chat_request(parse_json_body(body), limits());
  try {
    tool_call_grammar(r, ToolCallFormat::kJson);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools[0].function.parameters");
    EXPECT_NE(e.message.find("allOf"), std::string::npos) << e.message;
  }
  // Not strict: not constrained at all (whatever the schema says).
  std::string loose = body;
  loose.replace(loose.find("\"strict\":true"), 13, "\"strict\":false");
  EXPECT_FALSE(tool_call_grammar(parse_chat_request(parse_json_body(loose), limits()),
                                 ToolCallFormat::kJson));
  // Beside a strict one, a non-strict function whose schema does not compile takes any arguments.
  std::string mixed = R"({"model":"m","messages":[{"role":"user","content":"hi"}],
    "tool_choice":"required","tools":[{"type":"function","function":{"name":"f",
    "parameters":{"type":"object","properties":{"a":{"allOf":[]}}}}},
    {"type":"function","function":{"name":"g","strict":true,"parameters":{"type":"object"}}}]})";
  auto g = tool_call_grammar(parse_chat_request(parse_json_body(mixed), limits()),
                             ToolCallFormat::kJson);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, R"({"name":"f","arguments":{"anything":true}})"
                          "\n</tool_call>"));
  // A fallback after part of a schema was written: no rule of it is left dangling.
  std::string partial = R"({"model":"m","messages":[{"role":"user","content":"hi"}],
    "tool_choice":"required","tools":[{"type":"function","function":{"name":"f",
    "parameters":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},
    "u":{"type":"string","format":"uri"}}}}},
    {"type":"function","function":{"name":"g","strict":true,"parameters":{"type":"object"}}}]})";
  auto fallback = tool_call_grammar(parse_chat_request(parse_json_body(partial), limits()),
                                    ToolCallFormat::kJson);
  ASSERT_TRUE(fallback);
  EXPECT_TRUE(accepts(*fallback, R"({"name":"f","arguments":{"u":1}})"
                                 "\n</tool_call>"));
}

}  // namespace
}  // namespace md::server
