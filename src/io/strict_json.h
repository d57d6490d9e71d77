// JSON parsing for untrusted checkpoint metadata: rejects duplicate object keys and deep nesting,
// which nlohmann's own parser accepts (it silently keeps the last duplicate).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace md {

// Deep enough for any checkpoint or config file; shallow enough that hostile input cannot
// exhaust memory with millions of nested empty containers.
inline constexpr std::size_t kStrictJsonMaxDepth = 64;

// Parses `text` as one JSON value (RFC 8259, no comments, trailing whitespace allowed, no NUL
// bytes anywhere).
// Throws md::Error naming `origin` on a syntax error, a duplicate key (with its path) or nesting
// deeper than `max_depth`.
nlohmann::json parse_strict_json(std::string_view text, std::string_view origin,
                                 std::size_t max_depth = kStrictJsonMaxDepth);

// Quotes untrusted text for an error message: JSON escapes for control characters, invalid UTF-8
// replaced, and cut after `max_chars` bytes so a hostile 100 MB name cannot flood the log.
std::string quote_for_message(std::string_view text, std::size_t max_chars = 200);

}  // namespace md
