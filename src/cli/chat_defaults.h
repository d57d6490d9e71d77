// What a chat turn samples with when neither the user's flags nor the model say: a newcomer's
// first chat must give coherent, bounded replies.
#pragma once

#include <cstdint>
#include <string>

#include "cli/model_session.h"

namespace md::cli {

// A chat reply stops after this many tokens unless --max-tokens says otherwise: long enough for
// a reasoning model's usual thinking and answer, short enough that a reply which never reaches
// its end-of-turn token (a small model looping) costs a bounded wait.
inline constexpr int64_t kChatTurnMaxTokens = 2048;

// `flags` with the chat's defaults filled in: the turn limit above always, and, when the model
// ships no sampling settings (a GGUF file, a directory without generation_config.json),
// conservative ones for the fields the user left unset: temperature 0.2, top-k 40, top-p 0.9,
// min-p 0.05. Sampling at temperature 1 with no truncation, the engine's neutral default, lets a
// small model draw from the long tail, derail, and never emit its end-of-turn token; even
// llama.cpp's 0.8 derailed the default SmolLM2-135M on two of three seeds of a factual question
// (it answered in invented French), 0.2 on none of four. Larger models lose little at 0.2, and
// --temperature asks for more varied replies.
SamplingFlags chat_sampling(SamplingFlags flags, bool model_sets_sampling);

// One line for the chat's banner: what the replies are sampled with and where it came from.
std::string describe_chat_sampling(const SamplingFlags& chosen, const SamplingFlags& given,
                                   bool model_sets_sampling);

}  // namespace md::cli
