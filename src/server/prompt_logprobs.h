// The prompt_logprobs extension (§6.4), shared by chat (top level) and completions (per choice):
// null for the first prompt token, then {"<id>": {logprob, rank, decoded_token}} holding the
// actual token and the top N alternatives.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/logprobs.h"
#include "text/tokenizer.h"

namespace md::server {

nlohmann::ordered_json prompt_logprobs_json(const Tokenizer& tokenizer,
                                            const std::vector<int32_t>& prompt,
                                            const std::vector<engine::ScoredToken>& scores,
                                            int64_t top_n);

}  // namespace md::server
