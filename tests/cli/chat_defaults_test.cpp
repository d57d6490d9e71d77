#include "cli/chat_defaults.h"

#include <gtest/gtest.h>

namespace md::cli {
namespace {

TEST(ChatDefaults, AModelWithoutSamplingSettingsGetsConservativeOnesAndABoundedReply) {
  const SamplingFlags s = chat_sampling(SamplingFlags{}, /*model_sets_sampling=*/false);
  EXPECT_EQ(s.temperature, 0.2f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.min_p, 0.05f);
  EXPECT_EQ(s.max_tokens, kChatTurnMaxTokens);
  EXPECT_FALSE(s.repetition_penalty.has_value());
}

TEST(ChatDefaults, TheUsersFlagsWin) {
  SamplingFlags given;
  given.temperature = 0.3f;
  given.min_p = 0.0f;
  given.max_tokens = 50;
  const SamplingFlags s = chat_sampling(given, false);
  EXPECT_EQ(s.temperature, 0.3f);
  EXPECT_EQ(s.min_p, 0.0f);
  EXPECT_EQ(s.max_tokens, 50);
  EXPECT_EQ(s.top_k, 40);  // only the unset fields are filled
  SamplingFlags greedy;
  greedy.greedy = true;
  EXPECT_FALSE(chat_sampling(greedy, false).temperature.has_value());
}

TEST(ChatDefaults, TheModelsOwnSettingsAreLeftAlone) {
  const SamplingFlags s = chat_sampling(SamplingFlags{}, /*model_sets_sampling=*/true);
  EXPECT_FALSE(s.temperature.has_value());
  EXPECT_FALSE(s.top_p.has_value());
  EXPECT_FALSE(s.min_p.has_value());
  EXPECT_EQ(s.max_tokens, kChatTurnMaxTokens);
}

TEST(ChatDefaults, TheBannerSaysWhereTheSettingsComeFrom) {
  const SamplingFlags none;
  EXPECT_EQ(describe_chat_sampling(chat_sampling(none, false), none, false),
            "temperature 0.2, top-k 40, top-p 0.9, min-p 0.05 (the chat's defaults where not "
            "given: the model sets none), replies up to 2048 tokens");
  EXPECT_EQ(describe_chat_sampling(chat_sampling(none, true), none, true),
            "sampling from the model's generation_config.json (flags override), replies up to "
            "2048 tokens");
}

}  // namespace
}  // namespace md::cli
