// The choice assembler splits reasoning from the answer in the model's chat format: think tags or
// Muse's message headers, the latter read from the special tokens the detokenizer keeps.
#include <gtest/gtest.h>

#include "server/choice_assembler.h"

namespace md::server {
namespace {

engine::TokenOutcome piece(std::string text, bool finished = false) {
  engine::TokenOutcome outcome;
  outcome.text = std::move(text);
  outcome.finished = finished;
  outcome.finish = engine::FinishReason::kStop;
  return outcome;
}

struct Totals {
  std::string reasoning, content, finish_reason;
};

Totals run(ChoiceAssembler& assembler, const std::vector<std::string>& pieces) {
  Totals t;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    ChoiceDelta d = assembler.add(piece(pieces[i], i + 1 == pieces.size()));
    t.reasoning += d.reasoning;
    t.content += d.content;
    if (d.finished) t.finish_reason = d.finish_reason;
  }
  return t;
}

TEST(ChoiceAssemblerChannels, MuseHeadersSplitReasoningFromTheAnswer) {
  ChoiceConfig config;
  config.split_reasoning = true;
  config.channel_format = ChannelFormat::kMuseHeaders;
  config.prompt_end = "<|eot|><|start|>assistant";
  ChoiceAssembler assembler(config);
  Totals t = run(assembler, {" to", "=self", "<|message|>", "Add them", ".", "<|eom|>", "<|start|>",
                             "assistant to=user", "<|message|>", "4", ""});
  EXPECT_EQ(t.reasoning, "Add them.");
  EXPECT_EQ(t.content, "4");
  EXPECT_EQ(t.finish_reason, "stop");
  // The to=self message's tokens count as reasoning, its header and <|eom|> included: 6.
  EXPECT_EQ(assembler.reasoning_tokens(), 6);
}

// The same stream with think tags configured is all answer: the format decides.
TEST(ChoiceAssemblerChannels, ThinkTagsDoNotReadHeaders) {
  ChoiceConfig config;
  config.split_reasoning = true;
  config.channel_format = ChannelFormat::kThinkTags;
  ChoiceAssembler assembler(config);
  Totals t = run(assembler, {" to=self", "<|message|>", "x", ""});
  EXPECT_EQ(t.reasoning, "");
  EXPECT_EQ(t.content, " to=self<|message|>x");
  ChoiceAssembler thinking(config);
  t = run(thinking, {"<think>", "hm", "</think>", "ok", ""});
  EXPECT_EQ(t.reasoning, "hm");
  EXPECT_EQ(t.content, "ok");
  EXPECT_EQ(thinking.reasoning_tokens(), 2);  // "hm" and the closing tag
}

}  // namespace
}  // namespace md::server
