// How tokens appear in log-probability output (§6.3): text when the bytes are valid UTF-8,
// otherwise "bytes:\xHH..." ; plus the exact bytes and code-point counting for text offsets.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace md::server {

// The display string of token `id` (special tokens as their literal text).
std::string token_string(const Tokenizer& tokenizer, int32_t id);
// The token's exact bytes as a JSON array of integers.
nlohmann::ordered_json token_bytes_json(const Tokenizer& tokenizer, int32_t id);
// Unicode code points in valid UTF-8 text (continuation bytes are not counted).
int64_t code_points(std::string_view text);
// Log-probabilities are finite in JSON: anything below -9999 (including -inf) is written -9999.
double json_logprob(float logprob);

}  // namespace md::server
