#include "cli/chat_defaults.h"

#include <fmt/format.h>

namespace md::cli {

SamplingFlags chat_sampling(SamplingFlags flags, bool model_sets_sampling) {
  if (flags.max_tokens == 0) flags.max_tokens = kChatTurnMaxTokens;
  if (model_sets_sampling || flags.greedy) return flags;
  if (!flags.temperature) flags.temperature = 0.2f;
  if (!flags.top_k) flags.top_k = 40;
  if (!flags.top_p) flags.top_p = 0.9f;
  if (!flags.min_p) flags.min_p = 0.05f;
  return flags;
}

std::string describe_chat_sampling(const SamplingFlags& chosen, const SamplingFlags& given,
                                   bool model_sets_sampling) {
  std::string limit = fmt::format("replies up to {} tokens", chosen.max_tokens);
  if (given.greedy) return "greedy, " + limit;
  if (model_sets_sampling) {
    return "sampling from the model's generation_config.json (flags override), " + limit;
  }
  return fmt::format(
      "temperature {:g}, top-k {}, top-p {:g}, min-p {:g} (the chat's defaults where not given: "
      "the model sets none), {}",
      chosen.temperature.value_or(1.0f), chosen.top_k.value_or(0), chosen.top_p.value_or(1.0f),
      chosen.min_p.value_or(0.0f), limit);
}

}  // namespace md::cli
