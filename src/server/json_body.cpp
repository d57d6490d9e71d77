#include "server/json_body.h"

#include <cstdint>
#include <utility>

#include "base/utf8.h"
#include "server/api_error.h"

namespace md::server {
namespace {

// What a lexical pass over JSON text finds that the parser either accepts silently (depth) or
// rejects without saying why (lone surrogates, which must be reported as an encoding error).
struct Scan {
  std::size_t max_depth = 0;
  bool lone_surrogate = false;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of "\uXXXX" starting at text[pos] (the backslash), or -1 when there is none.
int32_t escape_at(std::string_view text, std::size_t pos) {
  if (pos + 6 > text.size() || text[pos] != '\\' || text[pos + 1] != 'u') return -1;
  int32_t unit = 0;
  for (std::size_t i = pos + 2; i < pos + 6; ++i) {
    const int digit = hex_digit(text[i]);
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

bool is_high_surrogate(int32_t unit) {
  return unit >= 0xD800 && unit <= 0xDBFF;
}
bool is_low_surrogate(int32_t unit) {
  return unit >= 0xDC00 && unit <= 0xDFFF;
}

// Handles the escape whose backslash is at text[pos] inside a string; returns the position after
// it. Exact for valid JSON; on malformed text it only has to terminate.
std::size_t skip_escape(std::string_view text, std::size_t pos, Scan& scan) {
  const int32_t unit = escape_at(text, pos);
  if (unit < 0) return pos + 2;  // a one-character escape such as \n or \" (or malformed)
  if (is_low_surrogate(unit)) {
    scan.lone_surrogate = true;
    return pos + 6;
  }
  if (!is_high_surrogate(unit)) return pos + 6;
  if (is_low_surrogate(escape_at(text, pos + 6))) return pos + 12;  // a valid pair
  scan.lone_surrogate = true;
  return pos + 6;
}

Scan scan_json(std::string_view text) {
  Scan scan;
  std::size_t depth = 0;
  bool in_string = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (in_string) {
      if (c == '\\') {
        pos = skip_escape(text, pos, scan);
        continue;
      }
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
      if (depth > scan.max_depth) scan.max_depth = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    ++pos;
  }
  return scan;
}

// Parses without exceptions: a malformed body is an expected outcome, not an exceptional one.
std::optional<nlohmann::ordered_json> parse(std::string_view text) {
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr,
                                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

}  // namespace

nlohmann::ordered_json parse_json_body(std::string_view body) {
  if (!utf8::is_valid(body)) throw invalid_encoding();
  const Scan scan = scan_json(body);
  if (scan.lone_surrogate) throw invalid_encoding();
  if (scan.max_depth > kMaxJsonDepth) throw invalid_json();
  std::optional<nlohmann::ordered_json> value = parse(body);
  if (!value) throw invalid_json();
  if (!value->is_object()) throw not_an_object();
  return std::move(*value);
}

std::optional<nlohmann::ordered_json> parse_embedded_json(std::string_view text) {
  if (scan_json(text).max_depth > kMaxJsonDepth) return std::nullopt;
  return parse(text);
}

}  // namespace md::server
