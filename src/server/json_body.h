// Request body → JSON (docs/openai-api.md §2.1 steps 4–5): UTF-8 first, then the JSON grammar,
// then "the top level is an object", each failure with its own error of §9.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace md::server {

// Deepest nesting of arrays and objects accepted. The parser itself copes with any depth, but
// serializing (error messages, the chat template's tojson) and the template engine recurse once
// per level, so an unbounded depth would let a 16 MiB body of '[' exhaust the stack. Real
// requests (tool schemas included) stay far below this. Deeper bodies are refused as invalid
// JSON, the way other bounded parsers (serde_json, Python's json) report their recursion limit.
inline constexpr std::size_t kMaxJsonDepth = 512;

// Parses a request body. Throws ApiError:
//  - invalid_encoding when the bytes are not UTF-8, or a string holds a lone surrogate escape
//    such as "\ud800" (it cannot become UTF-8 either);
//  - invalid_json when the body is empty, not JSON, or nested deeper than kMaxJsonDepth;
//  - not_an_object when the top level is not an object.
nlohmann::ordered_json parse_json_body(std::string_view body);

// Parses JSON text found inside a request (an assistant tool call's string `arguments`), keeping
// key order. nullopt when the text is not valid JSON, or is nested deeper than kMaxJsonDepth.
std::optional<nlohmann::ordered_json> parse_embedded_json(std::string_view text);

}  // namespace md::server
