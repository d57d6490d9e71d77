// ChatSession on the tiny fixture model: the history it keeps, what an error or a cancelled reply
// leaves behind, and reuse of the sequence from one turn to the next.
#include "cli/chat_session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "base/error.h"

namespace md::cli {
namespace {

ModelSession open_fixture(int64_t context = 0) {
  ModelFlags flags;
  flags.model = std::string(MD_GOLDEN_DIR) + "/qwen38/tiny-qwen38";
  flags.context = context;
  flags.threads = 1;
  return open_model_session(flags);
}

SamplingFlags greedy(int64_t max_tokens) {
  SamplingFlags flags;
  flags.greedy = true;
  flags.ignore_eos = true;
  flags.max_tokens = max_tokens;
  return flags;
}

TEST(ChatSession, KeepsUserAndAssistantTurnsAfterTheSystemMessage) {
  ModelSession model = open_fixture();
  ChatSession chat(model, greedy(5), ChatOptions{"Be brief.", true});
  std::string streamed;
  ChatTurn turn = chat.send("Hi", [&](const ReasoningParser::Segment& s) { streamed += s.text; });
  EXPECT_EQ(streamed, turn.reasoning + turn.answer);
  EXPECT_EQ(turn.stats.generated_tokens, 5);
  const nlohmann::ordered_json& messages = chat.messages();
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0]["role"], "system");
  EXPECT_EQ(messages[1], (nlohmann::ordered_json{{"role", "user"}, {"content", "Hi"}}));
  EXPECT_EQ(messages[2]["role"], "assistant");
  EXPECT_EQ(messages[2]["content"], turn.answer);
  EXPECT_TRUE(messages[2]["reasoning_content"].is_string());
  chat.reset();
  EXPECT_EQ(chat.messages().size(), 1u);
  EXPECT_EQ(chat.context_used(), 0);
}

TEST(ChatSession, SecondTurnReusesTheSequenceOfTheFirst) {
  ModelSession model = open_fixture();
  // Four greedy tokens of this fixture survive the template's re-rendering unchanged (longer
  // random replies may end in characters the template trims, and then nothing is reused).
  ChatSession chat(model, greedy(4), {});
  chat.send("Hi", nullptr);
  int64_t held = chat.context_used();
  ChatTurn second = chat.send("Bye", nullptr);
  EXPECT_GT(held, 0);
  EXPECT_EQ(second.stats.reused_tokens, held);
}

TEST(ChatSession, ErrorLeavesTheHistoryAsItWas) {
  ModelSession model = open_fixture(/*context=*/40);
  ChatSession chat(model, greedy(2), {});
  EXPECT_THROW(chat.send("Hi", nullptr), Error);  // the templated prompt alone exceeds 40 tokens
  EXPECT_TRUE(chat.messages().empty());
  EXPECT_FALSE(chat.last_turn().has_value());
}

TEST(ChatSession, CancelledReplyStaysInTheHistory) {
  ModelSession model = open_fixture();
  ChatSession chat(model, greedy(50), {});
  std::atomic<bool> cancel{true};
  ChatTurn turn = chat.send("Hi", nullptr, &cancel);
  EXPECT_EQ(turn.finish, engine::FinishReason::kCancelled);
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages()[1]["role"], "assistant");
}

}  // namespace
}  // namespace md::cli
