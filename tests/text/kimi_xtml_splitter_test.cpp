// Kimi K3's output split (text/kimi_xtml_splitter.h): think text is reasoning, response text the
// answer, tags consumed, tool calls handed on as <tool_call> blocks that ToolCallParser reads, the
// same for any split of the stream.
#include "text/kimi_xtml_splitter.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "text/channel_splitter.h"
#include "text/tool_call_parser.h"

namespace md {
namespace {

using Section = KimiXtmlSplitter::Section;

struct Split {
  std::string reasoning, answer;
};

Split run(Section start, const std::vector<std::string>& pieces) {
  KimiXtmlSplitter splitter(start);
  Split out;
  auto take = [&](const std::vector<ChannelSplitter::Segment>& segments) {
    for (const auto& s : segments) {
      (s.kind == ChannelSplitter::Segment::kReasoning ? out.reasoning : out.answer) += s.text;
    }
  };
  for (const std::string& piece : pieces) take(splitter.push(piece));
  take(splitter.finish());
  return out;
}

const std::string kOutput =
    "Need the weather & a search.<|close|>think<|sep|><|open|>response<|sep|>Checking."
    "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" "
    "index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris &amp; "
    "\"Lyon\"<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>3"
    "<|close|>argument<|sep|><|close|>call<|sep|><|open|>call tool=\"se&quot;arch\" "
    "index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>{\"query\": \"k3\", \"n\": [1, 2]}"
    "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";

std::vector<ToolCall> calls_of(const std::string& answer, std::string* content) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
     "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])");
  int next = 0;
  ToolCallParser parser(tools, [&] { return "call_" + std::to_string(next++); });
  ToolCallParser::Output whole = parser.push(answer);
  ToolCallParser::Output end = parser.finish();
  *content = whole.content + end.content;
  whole.calls.insert(whole.calls.end(), end.calls.begin(), end.calls.end());
  return whole.calls;
}

TEST(KimiXtmlSplitter, ReasoningAnswerAndCallsFromAWholeTurn) {
  const Split whole = run(Section::kThink, {kOutput});
  EXPECT_EQ(whole.reasoning, "Need the weather & a search.");
  std::string content;
  const std::vector<ToolCall> calls = calls_of(whole.answer, &content);
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city":"Paris &amp; \"Lyon\"","days":3})");
  EXPECT_EQ(calls[1].name, "se\"arch");  // attribute values are unescaped
  EXPECT_EQ(calls[1].arguments, R"({"query":"k3","n":[1,2]})");
}

TEST(KimiXtmlSplitter, AnySplitOfTheStreamGivesTheSameText) {
  const Split whole = run(Section::kThink, {kOutput});
  for (std::size_t cut = 0; cut <= kOutput.size(); ++cut) {
    const Split two = run(Section::kThink, {kOutput.substr(0, cut), kOutput.substr(cut)});
    ASSERT_EQ(two.reasoning, whole.reasoning) << cut;
    ASSERT_EQ(two.answer, whole.answer) << cut;
  }
  std::vector<std::string> bytes;
  for (char c : kOutput) bytes.emplace_back(1, c);
  const Split each = run(Section::kThink, bytes);
  EXPECT_EQ(each.reasoning, whole.reasoning);
  EXPECT_EQ(each.answer, whole.answer);
}

TEST(KimiXtmlSplitter, WhereTheOutputStarts) {
  EXPECT_EQ(
      KimiXtmlSplitter::start_of("…<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"),
      Section::kThink);
  EXPECT_EQ(KimiXtmlSplitter::start_of("…<|open|>response<|sep|>\n"), Section::kResponse);
  EXPECT_EQ(KimiXtmlSplitter::start_of("<|close|>message<|sep|><|end_of_msg|>"), Section::kMessage);
  // Thinking off: everything up to the response's end is the answer.
  const Split off = run(Section::kResponse, {"4.<|close|>response<|sep|><|close|>message<|sep|>"});
  EXPECT_EQ(off.reasoning, "");
  EXPECT_EQ(off.answer, "4.");
  // A reasoning that never closes (cut by max_tokens) stays reasoning.
  const Split cut = run(Section::kThink, {"still thinking <|clo"});
  EXPECT_EQ(cut.reasoning, "still thinking <|clo");
  EXPECT_EQ(cut.answer, "");
}

TEST(KimiXtmlSplitter, UnknownTagsAndStrayMarkersAreText) {
  const Split s = run(Section::kResponse,
                      {"a <|open|>b<|sep|>c<|close|>b<|sep|> d <|open|>no sep", "<|end_of_msg|>"});
  EXPECT_EQ(s.answer, "a <|open|>b<|sep|>c<|close|>b<|sep|> d <|open|>no sep");
}

// Generation stopped inside a call: the block is closed so the call parser can take it.
TEST(KimiXtmlSplitter, AnUnfinishedCallIsClosed) {
  const Split s = run(Section::kResponse,
                      {"<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" "
                       "index=\"1\"<|sep|><|open|>argument key=\"x\" type=\"string\"<|sep|>v"});
  std::string content;
  const std::vector<ToolCall> calls = calls_of(s.answer, &content);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "f");
  EXPECT_EQ(calls[0].arguments, R"({"x":"v"})");
}

// Each typed argument becomes JSON of its type, whatever the tool's schema says (none here);
// text that is not JSON of its declared type stays a string; an empty JSON block is {}; a call
// left open by its tools section's end is handed on before the text after it.
TEST(KimiXtmlSplitter, TypedArgumentsEmptyBlocksAndCallsLeftOpen) {
  const Split s =
      run(Section::kResponse,
          {"<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
           "<|open|>argument key=\"n\" type=\"number\"<|sep|>2.5<|close|>argument<|sep|>"
           "<|open|>argument key=\"b\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|>"
           "<|open|>argument key=\"o\" type=\"object\"<|sep|>{\"k\": [1, null]}<|close|>argument"
           "<|sep|><|open|>argument key=\"z\" type=\"null\"<|sep|>null<|close|>argument<|sep|>"
           "<|open|>argument key=\"bad\" type=\"number\"<|sep|>12abc<|close|>argument<|sep|>"
           "<|open|>argument key=\"s\" type=\"string\"<|sep|>42<|close|>argument<|sep|>"
           "<|close|>call<|sep|><|open|>call tool=\"g\" index=\"2\"<|sep|><|open|>json "
           "type=\"object\"<|sep|> <|close|>json<|sep|><|close|>call<|sep|><|open|>call "
           "tool=\"h\" index=\"3\"<|sep|><|open|>argument key=\"x\" type=\"string\"<|sep|>y"
           "<|close|>argument<|sep|><|close|>tools<|sep|>after"});
  std::string content;
  const std::vector<ToolCall> calls = calls_of(s.answer, &content);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].arguments,
            R"({"n":2.5,"b":true,"o":{"k":[1,null]},"z":null,"bad":"12abc","s":"42"})");
  EXPECT_EQ(calls[1].name, "g");
  EXPECT_EQ(calls[1].arguments, "{}");
  EXPECT_EQ(calls[2].name, "h");
  EXPECT_EQ(calls[2].arguments, R"({"x":"y"})");
  EXPECT_EQ(content, "after");
}

// A marker followed by another before any <|sep|> is no tag: it is text at once, and the tag
// after it still counts; so is a marker whose tag never ends within 4096 bytes.
TEST(KimiXtmlSplitter, AMarkerWithoutItsSepIsText) {
  const Split s = run(Section::kThink, {"x <|open|> y", "<|close|>think<|sep|>after"});
  EXPECT_EQ(s.reasoning, "x <|open|> y");
  EXPECT_EQ(s.answer, "after");
  const std::string long_text(5000, 'a');
  KimiXtmlSplitter splitter(Section::kThink);
  std::string released;
  for (const auto& segment : splitter.push("<|open|>" + long_text)) released += segment.text;
  EXPECT_EQ(released, "<|open|>" + long_text);  // not held back once it is too long for a tag
}

// Fuzz: streams of random markers, tags (known, unknown, unfinished), attribute text and
// bytes, split at random places. Whatever the stream, splitting it does not change the text,
// the splitter never throws, and every tool call it hands on parses.
TEST(KimiXtmlSplitter, RandomStreamsSplitAnywhereGiveTheSameText) {
  const std::vector<std::string> atoms = {"<|open|>",
                                          "<|close|>",
                                          "<|sep|>",
                                          "<|end_of_msg|>",
                                          "think",
                                          "response",
                                          "tools",
                                          "call tool=\"f\" index=\"1\"",
                                          "argument key=\"k\" type=\"number\"",
                                          "argument key=\"s\" type=\"string\"",
                                          "json type=\"object\"",
                                          "message",
                                          "{\"a\": 1}",
                                          "12",
                                          "text ",
                                          "<|",
                                          "|>",
                                          "\xff\xfe",
                                          "&quot;",
                                          "\n",
                                          "<tool_call>"};
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::string stream;
    const int length = static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) stream += atoms[rng() % atoms.size()];
    const Section start = static_cast<Section>(rng() % 3 == 0 ? 0 : rng() % 2 + 1);
    const Split whole = run(start, {stream});
    std::vector<std::string> pieces;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t n = 1 + rng() % 9;
      pieces.push_back(stream.substr(at, n));
      at += n;
    }
    const Split split = run(start, pieces);
    ASSERT_EQ(split.reasoning, whole.reasoning) << stream;
    ASSERT_EQ(split.answer, whole.answer) << stream;
    std::string content;
    EXPECT_NO_THROW(calls_of(whole.answer, &content)) << stream;
  }
}

TEST(KimiXtmlSplitter, ReasoningPiecesAreCounted) {
  KimiXtmlSplitter splitter(Section::kThink);
  for (const char* piece : {"a", "b", "<|close|>think<|sep|>", "<|open|>response<|sep|>", "c"}) {
    (void)splitter.push(piece);
  }
  EXPECT_EQ(splitter.reasoning_pieces(), 3);
}

TEST(KimiXtmlSplitter, TheFormatIsReadFromTheTemplateSource) {
  EXPECT_EQ(channel_format_of_template("{{ '<|open|>' + tag }}…'<|close|>'…'<|sep|>'"),
            ChannelFormat::kKimiXtml);
  EXPECT_EQ(channel_format_of_template("<think>"), ChannelFormat::kThinkTags);
}

}  // namespace
}  // namespace md
