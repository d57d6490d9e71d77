// ToolCallParser and parse_tool_calls (docs/openai-api.md §12): both block formats, failed and
// unterminated blocks, the whitespace rules around calls, streaming holdback, and above all that
// streaming in any split gives exactly the whole-text result.
#include "text/tool_call_parser.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace md {

// Readable failures; found by gtest through argument-dependent lookup.
void PrintTo(const ToolCall& call, std::ostream* os) {
  *os << "{" << call.id << ", " << call.name << ", " << call.arguments << "}";
}

namespace {

using Json = nlohmann::ordered_json;

// "call_000…0", "call_000…1", …: valid ids that two runs can reproduce.
std::function<std::string()> counting_ids() {
  auto next = std::make_shared<int>(0);
  return [next] { return fmt::format("call_{:0>24}", (*next)++); };
}

// ^call_[A-Za-z0-9]{24}$, spelled out: std::regex trips GCC 12's -Wmaybe-uninitialized.
bool has_id_shape(std::string_view id) {
  if (!id.starts_with("call_") || id.size() != 5 + 24) return false;
  return std::ranges::all_of(id.substr(5), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
}

std::string id(int n) {
  return fmt::format("call_{:0>24}", n);
}

const Json& weather_tools() {
  static const Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"type": "string", "enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "typed", "parameters": {"type": "object",
      "properties": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
        "any": {"anyOf": [{"type": "string"}, {"type": "object"}]},
        "e": {"enum": ["1", "2"]}, "ie": {"type": "integer", "enum": [1, 2]},
        "opt": {"type": ["integer", "null"]}, "multi": {"type": ["integer", "string"]}}}}},
    {"type": "function", "function": {"name": "no_params"}}
  ])");
  return tools;
}

ParsedToolCalls parse(std::string_view text, const Json& tools = weather_tools()) {
  return parse_tool_calls(text, tools, counting_ids());
}

// What a client sees after streaming `pieces`: every content delta and every call, in order.
struct Streamed {
  std::vector<std::string> deltas;  // one per push, then one for finish
  std::string content;
  std::vector<ToolCall> calls;
};

Streamed stream(const std::vector<std::string>& pieces, const Json& tools = weather_tools()) {
  ToolCallParser parser(tools, counting_ids());
  Streamed streamed;
  auto take = [&](ToolCallParser::Output out) {
    streamed.deltas.push_back(out.content);
    streamed.content += out.content;
    for (ToolCall& call : out.calls) streamed.calls.push_back(std::move(call));
  };
  for (const std::string& piece : pieces) take(parser.push(piece));
  take(parser.finish());
  EXPECT_EQ(parser.calls_so_far(), static_cast<int>(streamed.calls.size()));
  return streamed;
}

// The arguments of the single call `text` parses into, or "<no call>".
std::string xml_arguments(std::string_view name, std::string_view parameters) {
  ParsedToolCalls parsed = parse(
      fmt::format("<tool_call>\n<function={}>\n{}</function>\n</tool_call>", name, parameters));
  return parsed.calls.size() == 1 ? parsed.calls[0].arguments : "<no call>";
}

std::string param(std::string_view key, std::string_view value) {
  return fmt::format("<parameter={}>\n{}\n</parameter>\n", key, value);
}

const std::string kJsonCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}"
    "\n</tool_call>";
const std::string kXmlCall =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
const std::string kWeatherArgs = R"({"city":"Paris","days":3})";

// ---- format choice ----

TEST(ToolCallFormat, XmlWhenTheTemplateWritesFunctionTags) {
  EXPECT_EQ(tool_call_format_for_template("{{- '<tool_call>\\n<function=' + tool_call.name }}"),
            ToolCallFormat::kXml);
  EXPECT_EQ(tool_call_format_for_template(R"({"name": {{ tool_call.name | tojson }}})"),
            ToolCallFormat::kJson);
  EXPECT_EQ(tool_call_format_for_template(""), ToolCallFormat::kJson);
}

TEST(ToolCallIds, RandomIdsHaveTheOpenAiShapeAndDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string fresh = random_tool_call_id();
    EXPECT_TRUE(has_id_shape(fresh)) << fresh;
    EXPECT_TRUE(seen.insert(fresh).second) << fresh;
  }
}

TEST(ToolCallIds, DefaultGeneratorIsRandom) {
  ParsedToolCalls parsed = parse_tool_calls(kJsonCall + kJsonCall, nullptr);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_TRUE(has_id_shape(parsed.calls[0].id));
  EXPECT_NE(parsed.calls[0].id, parsed.calls[1].id);
  ToolCallParser parser(nullptr);
  ToolCallParser::Output out = parser.push(kJsonCall);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_TRUE(has_id_shape(out.calls[0].id));
}

// ---- JSON format ----

TEST(ToolCallJson, ForcedCallParsesIntoOneCallWithoutContent) {
  ParsedToolCalls parsed = parse(kJsonCall);
  EXPECT_EQ(parsed.content, std::nullopt);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "get_weather", kWeatherArgs}));
}

TEST(ToolCallJson, ArgumentsKeepTheModelsKeyOrderAndAreCompact) {
  ParsedToolCalls parsed = parse(
      "<tool_call>{\"name\":\"f\",\"arguments\":{ \"z\" : 1, \"a\": [ true, null ], \"m\": "
      "{\"y\": \"é\\n\", \"b\": 2.5}}}</tool_call>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"z":1,"a":[true,null],"m":{"y":"é\n","b":2.5}})");
}

TEST(ToolCallJson, NameMayComeAfterArguments) {
  ParsedToolCalls parsed = parse(R"(<tool_call>{"arguments": {"x": 1}, "name": "f"}</tool_call>)");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "f", R"({"x":1})"}));
}

TEST(ToolCallJson, StringArgumentsAreUsedVerbatim) {
  ParsedToolCalls parsed =
      parse(R"(<tool_call>{"name": "f", "arguments": "{\"city\": \"Paris\"}"}</tool_call>)");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city": "Paris"})");
}

TEST(ToolCallJson, MissingOrNullArgumentsMeanAnEmptyObject) {
  for (const char* text : {R"(<tool_call>{"name": "f"}</tool_call>)",
                           R"(<tool_call>{"name": "f", "arguments": null}</tool_call>)"}) {
    ParsedToolCalls parsed = parse(text);
    ASSERT_EQ(parsed.calls.size(), 1u) << text;
    EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "f", "{}"}));
  }
}

TEST(ToolCallJson, NamesNotInToolsAreStillReturned) {
  ParsedToolCalls parsed = parse(R"(<tool_call>{"name": "unknown_tool"}</tool_call>)", nullptr);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "unknown_tool");
}

TEST(ToolCallJson, MalformedBlocksComeBackAsContent) {
  const std::vector<std::string> bodies = {
      R"({"name": "f", "arguments": {"x": 1})",      // truncated JSON
      R"({"name": "f", "arguments": {}} trailing)",  // text after the object
      R"({"arguments": {"x": 1}})",                  // no name
      R"({"name": "", "arguments": {}})",            // empty name
      R"({"name": 7, "arguments": {}})",             // name not a string
      R"({"name": "f", "arguments": [1, 2]})",       // arguments neither object nor string
      R"({"name": "f", "arguments": 3})",
      "",  // empty block
      "  \n ",
      "get_weather(city='Paris')",  // neither format
      "[{\"name\": \"f\"}]",
  };
  for (const std::string& body : bodies) {
    std::string text = "<tool_call>" + body + "</tool_call>";
    ParsedToolCalls parsed = parse(text);
    EXPECT_TRUE(parsed.calls.empty()) << body;
    EXPECT_EQ(parsed.content, text) << body;
  }
}

TEST(ToolCallJson, InvalidUtf8InAStringFailsTheBlock) {
  std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"\xff\"}}</tool_call>";
  ParsedToolCalls parsed = parse(text);
  EXPECT_TRUE(parsed.calls.empty());
  EXPECT_EQ(parsed.content, text);
}

// ---- XML format ----

TEST(ToolCallXml, IntegerTypedParameterBecomesAJsonNumber) {
  ParsedToolCalls parsed = parse(kXmlCall);
  EXPECT_EQ(parsed.content, std::nullopt);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "get_weather", kWeatherArgs}));
  Json arguments = Json::parse(parsed.calls[0].arguments);
  EXPECT_TRUE(arguments["days"].is_number_integer());
  EXPECT_EQ(arguments["days"], 3);
}

TEST(ToolCallXml, ValuesConvertByTheirSchemaType) {
  EXPECT_EQ(xml_arguments("typed", param("s", "42") + param("i", "-7") + param("n", "2.5") +
                                       param("b", "TRUE") + param("o", R"({"k": [1]})") +
                                       param("a", "[1, \"x\"]")),
            R"({"s":"42","i":-7,"n":2.5,"b":true,"o":{"k":[1]},"a":[1,"x"]})");
  EXPECT_EQ(xml_arguments("typed", param("b", "False") + param("n", "1e2") + param("n", "4")),
            R"({"b":false,"n":4})");
  EXPECT_EQ(xml_arguments("typed", param("n", "1e2")), R"({"n":100.0})");
  EXPECT_EQ(xml_arguments("typed", param("i", "18446744073709551615")),
            R"({"i":18446744073709551615})");
}

TEST(ToolCallXml, AnyOfIsParsedAsJsonAndFallsBackToText) {
  EXPECT_EQ(xml_arguments("typed", param("any", R"({"a": 1})")), R"({"any":{"a":1}})");
  EXPECT_EQ(xml_arguments("typed", param("any", "plain words")), R"({"any":"plain words"})");
}

TEST(ToolCallXml, EnumsAreTextUnlessTyped) {
  EXPECT_EQ(xml_arguments("typed", param("e", "1")), R"({"e":"1"})");
  EXPECT_EQ(xml_arguments("get_weather", param("unit", "c")), R"({"unit":"c"})");
  EXPECT_EQ(xml_arguments("typed", param("ie", "2")), R"({"ie":2})");
}

TEST(ToolCallXml, TypeListsAreTriedInOrder) {
  EXPECT_EQ(xml_arguments("typed", param("opt", "5")), R"({"opt":5})");
  EXPECT_EQ(xml_arguments("typed", param("multi", "5") + param("multi", "five")),
            R"({"multi":"five"})");
  EXPECT_EQ(xml_arguments("typed", param("multi", "5")), R"({"multi":5})");
}

TEST(ToolCallXml, LiteralNullIsNullForKnownProperties) {
  EXPECT_EQ(xml_arguments("typed", param("i", "null") + param("s", "null")),
            R"({"i":null,"s":null})");
  EXPECT_EQ(xml_arguments("typed", param("unknown", "null")), R"({"unknown":"null"})");
}

TEST(ToolCallXml, FailedConversionsAndUnknownPropertiesStayText) {
  EXPECT_EQ(xml_arguments("typed", param("i", "3.5") + param("n", "abc") + param("b", "yes") +
                                       param("o", "{broken") + param("a", "1e999") +
                                       param("extra", "17")),
            R"({"i":"3.5","n":"abc","b":"yes","o":"{broken","a":"1e999","extra":"17"})");
  EXPECT_EQ(xml_arguments("typed", param("n", "1e999") + param("i", "+4") + param("i", "")),
            R"({"n":"1e999","i":""})");
}

TEST(ToolCallXml, UnknownToolsAndToolsWithoutParametersKeepText) {
  EXPECT_EQ(xml_arguments("nope", param("days", "3")), R"({"days":"3"})");
  EXPECT_EQ(xml_arguments("no_params", param("days", "3")), R"({"days":"3"})");
  ParsedToolCalls parsed = parse_tool_calls(
      "<tool_call><function=get_weather>" + param("days", "3") + "</function></tool_call>", nullptr,
      counting_ids());
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"days":"3"})");
}

TEST(ToolCallXml, OnlyOneNewlineIsStrippedOnEachSide) {
  EXPECT_EQ(xml_arguments("typed", param("s", "\nline 1\n  line 2\n")),
            R"({"s":"\nline 1\n  line 2\n"})");
  EXPECT_EQ(xml_arguments("typed", "<parameter=s>  padded </parameter>"), R"({"s":"  padded "})");
  // Numbers tolerate the padding that text keeps.
  EXPECT_EQ(xml_arguments("typed", param("i", " 12 ")), R"({"i":12})");
}

TEST(ToolCallXml, NoParametersGivesAnEmptyObject) {
  EXPECT_EQ(xml_arguments("no_params", ""), "{}");
}

// Closing tags models drop at the end of a block are accepted, as vLLM's Qwen3-Coder parser does.
TEST(ToolCallXml, MissingClosingTagsAtTheEndAreAccepted) {
  for (const std::string& body :
       {"\n<function=get_weather>\n" + param("city", "Paris"),
        std::string("\n<function=get_weather>\n<parameter=city>\nParis\n"
                    "</function>"),
        std::string("\n<function=get_weather>\n<parameter=city>\nParis")}) {
    ParsedToolCalls parsed = parse("<tool_call>" + body + "\n</tool_call>");
    ASSERT_EQ(parsed.calls.size(), 1u) << body;
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris"})") << body;
  }
  ParsedToolCalls bare = parse("<tool_call>\n<function=get_weather>\n</tool_call>");
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.calls[0].arguments, "{}");
}

TEST(ToolCallXml, MalformedBlocksComeBackAsContent) {
  const std::vector<std::string> bodies = {
      "\n<function=>\n</function>",                                  // no name
      "\n<function=get_weather\n</function>",                        // name never closed
      "\n<function=f>\nstray text\n</function>",                     // junk between items
      "\n<function=f>\n</function>\ntrailing",                       // text after </function>
      "\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>",  // empty key
      "\n<parameter=city>\nParis\n</parameter>",                     // no <function=
  };
  for (const std::string& body : bodies) {
    std::string text = "<tool_call>" + body + "\n</tool_call>";
    ParsedToolCalls parsed = parse(text);
    EXPECT_TRUE(parsed.calls.empty()) << body;
    EXPECT_EQ(parsed.content, text) << body;
  }
}

// ---- content around blocks ----

TEST(ToolCallContent, TextWithoutBlocksIsContentAsIs) {
  EXPECT_EQ(parse("  Hello,\n world  \n").content, "  Hello,\n world  \n");
  EXPECT_EQ(parse("").content, "");
  EXPECT_EQ(parse("a <tool_ b").content, "a <tool_ b");
  EXPECT_EQ(parse("stray </tool_call> close").content, "stray </tool_call> close");
}

TEST(ToolCallContent, SegmentsLoseWhitespaceWhereTheyTouchACall) {
  ParsedToolCalls parsed = parse("  Let me check.\n\n" + kJsonCall + "\n\nDone.  ");
  EXPECT_EQ(parsed.content, "  Let me check.Done.  ");
  ASSERT_EQ(parsed.calls.size(), 1u);
}

TEST(ToolCallContent, WhitespaceBetweenCallsVanishesAndContentIsNull) {
  ParsedToolCalls parsed = parse("\n" + kJsonCall + "\n \t\n" + kXmlCall + "\n\n");
  EXPECT_EQ(parsed.content, std::nullopt);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "get_weather", kWeatherArgs}));
  EXPECT_EQ(parsed.calls[1], (ToolCall{id(1), "get_weather", kWeatherArgs}));
}

TEST(ToolCallContent, FailedBlocksKeepTheWhitespaceAroundThem) {
  const std::string failed = "<tool_call>{bad}</tool_call>";
  EXPECT_EQ(parse("a " + failed + " b").content, "a " + failed + " b");
  ParsedToolCalls parsed = parse(kJsonCall + "\n " + failed + "\n\n" + kXmlCall);
  EXPECT_EQ(parsed.content, failed);
  EXPECT_EQ(parsed.calls.size(), 2u);
  // Ids go to calls only, in order.
  EXPECT_EQ(parsed.calls[1].id, id(1));
}

TEST(ToolCallContent, UnterminatedBlockIsParsedAsIfClosed) {
  std::string open = kJsonCall.substr(0, kJsonCall.size() - std::string("</tool_call>").size());
  ParsedToolCalls parsed = parse("Sure. " + open);
  EXPECT_EQ(parsed.content, "Sure.");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, kWeatherArgs);
}

TEST(ToolCallContent, UnterminatedFailedBlockGoesToContentRaw) {
  EXPECT_EQ(parse("Sure. <tool_call>\n{\"name\": \"get_weather\", \"argu").content,
            "Sure. <tool_call>\n{\"name\": \"get_weather\", \"argu");
  // A half-written close tag belongs to the body, which then fails.
  std::string text = "<tool_call>{\"name\": \"f\"}</tool_ca";
  EXPECT_EQ(parse(text).content, text);
}

TEST(ToolCallContent, OpenTagInsideABlockIsBodyText) {
  std::string text = "<tool_call>{\"name\": \"<tool_call>\"}</tool_call>";
  ParsedToolCalls parsed = parse(text);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "<tool_call>");
}

TEST(ToolCallContent, ForcedNamedPrefixIsTheStartOfTheOutput) {
  std::string prefix = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  ParsedToolCalls parsed = parse(prefix + "{\"city\": \"Oslo\"}}\n</tool_call>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0], (ToolCall{id(0), "get_weather", R"({"city":"Oslo"})"}));
  std::string xml_prefix = "<tool_call>\n<function=get_weather>\n";
  parsed = parse(xml_prefix + param("days", "2") + "</function>\n</tool_call>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"days":2})");
}

// ---- streaming ----

TEST(ToolCallStreaming, PartialOpenTagIsHeldUntilDecided) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("Hello <tool_").content, "Hello");
  EXPECT_EQ(parser.push("box").content, " <tool_box");
  EXPECT_EQ(parser.push(" and <").content, " and");
  EXPECT_EQ(parser.finish().content, " <");
}

TEST(ToolCallStreaming, TrailingWhitespaceIsHeldUntilTextFollows) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("a \n").content, "a");
  EXPECT_EQ(parser.push("\t").content, "");
  EXPECT_EQ(parser.push("b").content, " \n\tb");
  EXPECT_EQ(parser.push("\n").content, "");
  EXPECT_EQ(parser.finish().content, "\n");
}

TEST(ToolCallStreaming, CallIsEmittedWholeAtItsCloseTag) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("Checking.\n\n<tool").content, "Checking.");
  ToolCallParser::Output inside = parser.push("_call>\n{\"name\": \"get_weather\", ");
  EXPECT_EQ(inside.content, "");
  EXPECT_TRUE(inside.calls.empty());
  EXPECT_FALSE(parser.block_closed());
  ToolCallParser::Output inside2 =
      parser.push("\"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_");
  EXPECT_TRUE(inside2.calls.empty());
  EXPECT_FALSE(parser.block_closed());
  ToolCallParser::Output closed = parser.push("call>\n\n");
  EXPECT_EQ(closed.content, "");
  ASSERT_EQ(closed.calls.size(), 1u);
  EXPECT_EQ(closed.calls[0], (ToolCall{id(0), "get_weather", kWeatherArgs}));
  EXPECT_TRUE(parser.block_closed());
  EXPECT_EQ(parser.calls_so_far(), 1);
  // Whitespace right after a call is dropped, text after it is not.
  EXPECT_EQ(parser.push("\n  ").content, "");
  EXPECT_EQ(parser.push(" Done").content, "Done");
  ToolCallParser::Output end = parser.finish();
  EXPECT_EQ(end.content, "");
  EXPECT_TRUE(end.calls.empty());
}

TEST(ToolCallStreaming, FailedBlockIsOneContentDeltaAtItsClose) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("x \n<tool_call>{oops").content, "x");
  EXPECT_EQ(parser.push("}").content, "");
  EXPECT_EQ(parser.push("</tool_call> y").content, " \n<tool_call>{oops}</tool_call> y");
  EXPECT_TRUE(parser.block_closed());
  EXPECT_EQ(parser.calls_so_far(), 0);
}

TEST(ToolCallStreaming, FinishParsesAnOpenBlock) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("<tool_call>\n{\"name\": \"f\"}\n").content, "");
  ToolCallParser::Output end = parser.finish();
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0], (ToolCall{id(0), "f", "{}"}));
  EXPECT_FALSE(parser.block_closed());
}

TEST(ToolCallStreaming, FinishReleasesAFailedOpenBlockWithItsWhitespace) {
  ToolCallParser parser(weather_tools(), counting_ids());
  EXPECT_EQ(parser.push("ok  <tool_call>{\"na").content, "ok");
  EXPECT_EQ(parser.finish().content, "  <tool_call>{\"na");
}

TEST(ToolCallStreaming, SeveralBlocksInOnePiece) {
  ToolCallParser parser(weather_tools(), counting_ids());
  ToolCallParser::Output out = parser.push("a\n" + kJsonCall + "\n" + kXmlCall + "\nb ");
  EXPECT_EQ(out.content, "ab");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[1], (ToolCall{id(1), "get_weather", kWeatherArgs}));
  EXPECT_EQ(parser.finish().content, " ");
}

// ---- streaming equals whole-text parsing, however the text is cut ----

void expect_stream_matches_whole(const std::string& text, const std::vector<std::string>& pieces) {
  ParsedToolCalls whole = parse(text);
  Streamed streamed = stream(pieces);
  EXPECT_EQ(streamed.content, whole.content.value_or("")) << "text: " << text;
  EXPECT_EQ(streamed.calls, whole.calls) << "text: " << text;
  // A push never releases whitespace that a following call would drop. (Partial-tag holdback is
  // checked by the dedicated tests: a delta may rightly end in "<" when a tag follows it.)
  for (std::size_t i = 0; i + 1 < streamed.deltas.size(); ++i) {
    const std::string& delta = streamed.deltas[i];
    if (delta.empty()) continue;
    EXPECT_EQ(std::string(" \t\n\r\f\v").find(delta.back()), std::string::npos)
        << "delta ends in whitespace: " << text;
  }
}

std::vector<std::string> split_at(const std::string& text, std::vector<std::size_t> cuts) {
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::string> pieces;
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    pieces.push_back(text.substr(from, cut - from));  // empty pieces are allowed, and tested
    from = cut;
  }
  pieces.push_back(text.substr(from));
  return pieces;
}

const std::vector<std::string>& curated_texts() {
  static const std::vector<std::string> texts = {
      kJsonCall,
      kXmlCall,
      "Let me look.\n\n" + kJsonCall + "\n\n" + kXmlCall + "\n",
      "  lead " + kJsonCall + " mid " + kXmlCall + " tail  ",
      "a <tool_call>{bad}</tool_call> b",
      kJsonCall + "\n\n<tool_call>{bad}</tool_call>\n\n" + kJsonCall,
      "text <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ",
      "text\n<tool_call>\n{\"name\": \"f\"}\n",
      "ends with <tool_",
      "ends with <tool_call",
      "ends with space \n\t ",
      "<<tool_call>{\"name\":\"f\"}</tool_call></tool_call>",
      "<tool_call></tool_call>",
      "<tool_call>",
      "",
      "   ",
      "no tools here",
      "<tool_call>{\"name\": \"f\"}</tool_call>   <tool_",
      "<tool_call>{\"name\": \"f\"}</tool_call>   x <tool_call>{\"name\": \"g\"}</tool_ca",
  };
  return texts;
}

TEST(ToolCallStreaming, EveryTwoPieceSplitMatchesWholeParse) {
  for (const std::string& text : curated_texts()) {
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      expect_stream_matches_whole(text, split_at(text, {cut}));
    }
  }
}

TEST(ToolCallStreaming, ByteByByteMatchesWholeParse) {
  for (const std::string& text : curated_texts()) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
    expect_stream_matches_whole(text, split_at(text, cuts));
  }
}

// Texts built from fragments that stress the parser: both formats, failed and unterminated
// blocks, stray and partial tags, whitespace runs, multi-byte text.
// GCC 12 at -O3 reports a false -Wrestrict inside std::string's inlined appends here (GCC bug
// 105329); nothing in this function overlaps.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> fragments = {
      "Hello",
      "world.",
      "é→",
      " ",
      "  ",
      "\n",
      "\n\n",
      " \t\r\n",
      "<",
      "<tool_",
      "<tool_call",
      "tool_call>",
      "<tool_call>",
      "</tool_call>",
      "</tool_",
      kJsonCall,
      kXmlCall,
      "<tool_call>{\"name\": \"typed\", \"arguments\": \"raw\"}</tool_call>",
      "<tool_call>\n<function=typed>\n" + param("i", "x") + param("b", "True") +
          "</function>\n</tool_call>",
      "<tool_call>{broken</tool_call>",
      "<tool_call>\n<function=f>\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}",
      "{\"name\": \"g\"}",
      "<function=get_weather>",
      "</function>",
      "\n" + param("days", "4"),
  };
  std::uniform_int_distribution<std::size_t> count(0, 10);
  std::uniform_int_distribution<std::size_t> pick(0, fragments.size() - 1);
  std::string text;
  for (std::size_t n = count(rng); n > 0; --n) text += fragments[pick(rng)];
  return text;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

TEST(ToolCallStreaming, RandomTextsInRandomSplitsMatchWholeParse) {
  std::mt19937 rng(20240611);
  int texts_with_calls = 0;
  int texts_with_content_and_calls = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = random_text(rng);
    ParsedToolCalls whole = parse(text);
    texts_with_calls += !whole.calls.empty();
    texts_with_content_and_calls += !whole.calls.empty() && whole.content.has_value();
    for (int split = 0; split < 4; ++split) {
      std::uniform_int_distribution<std::size_t> cut_count(0,
                                                           std::min<std::size_t>(text.size(), 12));
      std::uniform_int_distribution<std::size_t> at(0, text.size());
      std::vector<std::size_t> cuts(cut_count(rng));
      for (std::size_t& cut : cuts) cut = at(rng);
      expect_stream_matches_whole(text, split_at(text, cuts));
    }
    if (::testing::Test::HasFailure()) break;  // one failing text is enough to read
  }
  // The generator really exercises both outcomes.
  EXPECT_GT(texts_with_calls, 500);
  EXPECT_GT(texts_with_content_and_calls, 200);
}

}  // namespace
}  // namespace md
