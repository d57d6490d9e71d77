// ReasoningParser: reasoning and answer split the same way however the stream is cut, tags never
// leak into the text, partial tags are held back only until they are decided.
#include "text/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace md {
namespace {

using Segment = ReasoningParser::Segment;

// Concatenated reasoning and answer after feeding `pieces` one by one.
struct Split {
  std::string reasoning;
  std::string answer;
  bool operator==(const Split&) const = default;
};

void collect(const std::vector<Segment>& segments, Split& split) {
  for (const Segment& s : segments) {
    EXPECT_FALSE(s.text.empty());
    (s.kind == Segment::kReasoning ? split.reasoning : split.answer) += s.text;
  }
}

Split feed(bool in_reasoning, const std::vector<std::string>& pieces) {
  ReasoningParser parser(in_reasoning);
  Split split;
  for (const std::string& piece : pieces) collect(parser.push(piece), split);
  collect(parser.finish(), split);
  return split;
}

Split feed_bytes(bool in_reasoning, const std::string& text) {
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  return feed(in_reasoning, bytes);
}

std::ostream& operator<<(std::ostream& os, const Split& s) {
  return os << "{reasoning=\"" << s.reasoning << "\", answer=\"" << s.answer << "\"}";
}

TEST(ReasoningParser, WholeStringSplitsIntoReasoningAndAnswer) {
  EXPECT_EQ(feed(false, {"<think>\nLet me see.\n</think>\n\nHello!"}),
            (Split{"Let me see.\n", "Hello!"}));
}

TEST(ReasoningParser, ByteByByteEqualsWholeString) {
  const std::vector<std::pair<bool, std::string>> cases = {
      {false, "<think>\nLet me see.\n</think>\n\nHello!"},
      {true, "hmm <thi <think>nested</think>\n\n\nAnswer with </think stray </think> tag\n"},
      {true, "\n\nreasoning only, never closed </thin"},
      {false, "no tags at all < > </ <t"},
      {false, "\n\nleading newlines kept without a tag"},
  };
  for (const auto& [in_reasoning, text] : cases) {
    EXPECT_EQ(feed_bytes(in_reasoning, text), feed(in_reasoning, {text})) << text;
  }
}

TEST(ReasoningParser, TagSplitAcrossPiecesIsHeldBack) {
  ReasoningParser parser(true);
  std::vector<Segment> first = parser.push("thinking</th");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], (Segment{Segment::kReasoning, "thinking"}));
  EXPECT_TRUE(parser.push("in").empty());
  std::vector<Segment> rest = parser.push("k>\n\nDone");
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0], (Segment{Segment::kAnswer, "Done"}));
  EXPECT_FALSE(parser.in_reasoning());
  EXPECT_TRUE(parser.finish().empty());
}

TEST(ReasoningParser, OnePieceCanHoldBothKinds) {
  ReasoningParser parser(true);
  std::vector<Segment> segments = parser.push("a</think>\n\nb");
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0], (Segment{Segment::kReasoning, "a"}));
  EXPECT_EQ(segments[1], (Segment{Segment::kAnswer, "b"}));
}

TEST(ReasoningParser, NoTagsIsAllAnswer) {
  EXPECT_EQ(feed(false, {"Just ", "an answer."}), (Split{"", "Just an answer."}));
}

TEST(ReasoningParser, StartInReasoningWithoutOpenTag) {
  EXPECT_EQ(feed(true, {"Step 1.", "\n</think>", "\n\n", "Result"}),
            (Split{"Step 1.\n", "Result"}));
}

TEST(ReasoningParser, UnclosedReasoningAtTheEndStaysReasoning) {
  ReasoningParser parser(true);
  Split split;
  collect(parser.push("still thinking </thi"), split);
  EXPECT_EQ(split.reasoning, "still thinking ");
  collect(parser.finish(), split);
  EXPECT_EQ(split, (Split{"still thinking </thi", ""}));
  EXPECT_TRUE(parser.in_reasoning());
}

TEST(ReasoningParser, TagPrefixThatIsNotATagIsText) {
  ReasoningParser parser(false);
  EXPECT_TRUE(parser.push("<thi").empty());
  std::vector<Segment> segments = parser.push("s> is fine");
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0], (Segment{Segment::kAnswer, "<this> is fine"}));
}

TEST(ReasoningParser, NewlinesInsideTextAreKept) {
  EXPECT_EQ(feed(false, {"<think>a\n\nb</think>\n", "\nline 1\n\nline 2\n"}),
            (Split{"a\n\nb", "line 1\n\nline 2\n"}));
}

TEST(ReasoningParser, CustomTags) {
  ReasoningParser parser(false, ReasoningTags{"[R]", "[/R]"});
  Split split;
  collect(parser.push("[R]why[/"), split);
  collect(parser.push("R]what"), split);
  collect(parser.finish(), split);
  EXPECT_EQ(split, (Split{"why", "what"}));
}

TEST(ReasoningParser, StartsInReasoningDetectsAnOpenTagAtTheEnd) {
  EXPECT_TRUE(ReasoningParser::starts_in_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(ReasoningParser::starts_in_reasoning("assistant\n<think>"));
  EXPECT_TRUE(ReasoningParser::starts_in_reasoning("<think>\r\n \n"));
  EXPECT_FALSE(ReasoningParser::starts_in_reasoning("assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(ReasoningParser::starts_in_reasoning("user: what is <think>? \nassistant\n"));
  EXPECT_FALSE(ReasoningParser::starts_in_reasoning(""));
  EXPECT_FALSE(ReasoningParser::starts_in_reasoning("\n\n"));
}

}  // namespace
}  // namespace md
