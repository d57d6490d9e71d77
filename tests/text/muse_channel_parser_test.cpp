#include "text/muse_channel_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace md {
namespace {

using Segment = ChannelSplitter::Segment;

// The stream fed in pieces of `size` bytes, then finished; adjacent segments merged.
std::vector<Segment> split(std::string_view text, std::size_t size, bool starts_in_header = true) {
  MuseChannelParser parser(starts_in_header);
  std::vector<Segment> out;
  auto add = [&](std::vector<Segment> segments) {
    for (Segment& s : segments) {
      if (!out.empty() && out.back().kind == s.kind) {
        out.back().text += s.text;
      } else {
        out.push_back(std::move(s));
      }
    }
  };
  for (std::size_t at = 0; at < text.size(); at += size) add(parser.push(text.substr(at, size)));
  add(parser.finish());
  return out;
}

const std::string kTurn =
    " to=self<|message|>User asks 2+2. Simple.<|eom|><|start|>assistant to=user<|message|>"
    "2 + 2 = 4.<|eot|>";

TEST(MuseChannelParser, SelfIsReasoningAndUserIsTheAnswer) {
  const std::vector<Segment> expected = {{Segment::kReasoning, "User asks 2+2. Simple."},
                                         {Segment::kAnswer, "2 + 2 = 4."}};
  for (std::size_t size : {1, 2, 3, 5, 8, 1000}) {
    EXPECT_EQ(split(kTurn, size), expected) << "pieces of " << size;
  }
}

TEST(MuseChannelParser, CommentaryIsAnswerAndAnAnswerMayComeFirst) {
  EXPECT_EQ(split(" to=commentary<|message|>Looking it up.<|eom|><|start|>assistant to=self"
                  "<|message|>hm<|eom|><|start|>assistant to=user<|message|>Done.<|eot|>",
                  4),
            (std::vector<Segment>{{Segment::kAnswer, "Looking it up."},
                                  {Segment::kReasoning, "hm"},
                                  {Segment::kAnswer, "Done."}}));
  EXPECT_EQ(split(" to=user<|message|>Hi<|eot|>", 1),
            (std::vector<Segment>{{Segment::kAnswer, "Hi"}}));
}

// A piece ending in the start of a marker is held until the next piece decides; an unfinished
// marker at the end is text after all.
TEST(MuseChannelParser, PartialMarkersAreHeldBack) {
  MuseChannelParser parser(true);
  EXPECT_TRUE(parser.push(" to=user<|mess").empty());
  EXPECT_EQ(parser.push("age|>a <"), (std::vector<Segment>{{Segment::kAnswer, "a "}}));
  EXPECT_TRUE(parser.push("|eo").empty());
  EXPECT_EQ(parser.finish(), (std::vector<Segment>{{Segment::kAnswer, "<|eo"}}));
}

TEST(MuseChannelParser, OutputWithoutAnyHeaderIsTheAnswer) {
  EXPECT_EQ(split("just text", 3), (std::vector<Segment>{{Segment::kAnswer, "just text"}}));
  // Every header's text, while no message opened, markers removed.
  EXPECT_EQ(split("foo<|start|>bar", 2), (std::vector<Segment>{{Segment::kAnswer, "foobar"}}));
  // Once a message has been seen, an unfinished header is dropped.
  EXPECT_EQ(split(" to=user<|message|>A<|eot|><|start|>assistant to=us", 2),
            (std::vector<Segment>{{Segment::kAnswer, "A"}}));
  // A prompt that does not end in a header: the output is a body of the answer.
  EXPECT_EQ(split("plain<|eot|>", 2, false), (std::vector<Segment>{{Segment::kAnswer, "plain"}}));
}

TEST(MuseChannelParser, ReasoningStateFollowsTheHeaders) {
  MuseChannelParser parser(true);
  EXPECT_FALSE(parser.in_reasoning());
  (void)parser.push(" to=self<|message|>x");
  EXPECT_TRUE(parser.in_reasoning());
  (void)parser.push("<|eom|><|start|>assistant");
  EXPECT_FALSE(parser.in_reasoning());
}

// One piece per token: a to=self message's tokens count, header and end marker included, once
// each; an answer's do not.
TEST(MuseChannelParser, ReasoningPiecesAreTheSelfMessagesTokens) {
  MuseChannelParser parser(true);
  for (std::string_view piece : {" to", "=self", "<|message|>", "a", "", "b<|eom|>", "<|start|>",
                                 "assistant to=user", "<|message|>", "c", "<|eot|>"}) {
    (void)parser.push(piece);
  }
  EXPECT_EQ(parser.reasoning_pieces(), 6);
  // A token that ends one self message and starts another counts once.
  MuseChannelParser twice(true);
  for (std::string_view piece :
       {" to=self<|message|>", "x<|eom|><|start|>assistant to=self", "<|message|>y"}) {
    (void)twice.push(piece);
  }
  EXPECT_EQ(twice.reasoning_pieces(), 3);
}

TEST(MuseChannelParser, TheGenerationPromptStartsAHeader) {
  EXPECT_TRUE(MuseChannelParser::starts_in_header("<|eot|><|start|>assistant"));
  EXPECT_TRUE(MuseChannelParser::starts_in_header("<|start|>assistant\n"));
  EXPECT_FALSE(MuseChannelParser::starts_in_header("<|start|>user<|message|>hi"));
}

TEST(ChannelFormat, ReadFromTheTemplateSource) {
  EXPECT_EQ(channel_format_of_template("{{ '<|start|>assistant to=self<|message|>' }}"),
            ChannelFormat::kMuseHeaders);
  EXPECT_EQ(channel_format_of_template("<think>\n"), ChannelFormat::kThinkTags);
  EXPECT_EQ(channel_format_of_template("{{ messages }}"), ChannelFormat::kNone);
  EXPECT_EQ(make_channel_splitter(ChannelFormat::kNone, ""), nullptr);
}

}  // namespace
}  // namespace md
