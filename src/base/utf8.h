// UTF-8 validation, repair and coding (tokenizers, templates, server): invalid input never
// crashes, it is repaired exactly like Python's bytes.decode('utf-8', 'replace') / Rust's
// String::from_utf8_lossy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace md::utf8 {

// The UTF-8 encoding of U+FFFD REPLACEMENT CHARACTER.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Result of looking at the bytes at one position.
struct Step {
  enum Kind { kValid, kInvalid, kIncomplete } kind;
  // kValid: length of the character. kInvalid: length of the maximal invalid subpart (bytes that
  // one U+FFFD replaces). kIncomplete: bytes available, all a valid prefix that the end cut short.
  std::size_t length;
};

// Classifies the sequence starting at bytes[pos] (pos < bytes.size()) following Unicode's
// "maximal subpart" practice (Unicode 15 §3.9, U+FFFD substitution of maximal subparts).
Step classify(std::string_view bytes, std::size_t pos);

// True when `bytes` is entirely well-formed UTF-8.
bool is_valid(std::string_view bytes);

// Replaces every maximal invalid subpart, and a truncated sequence at the end, by U+FFFD.
std::string repair(std::string_view bytes);

// Appends the UTF-8 encoding of `code_point` (must be a Unicode scalar value).
void append(std::string& out, char32_t code_point);

// Decodes the character at text[pos] (text must be valid UTF-8); advances pos past it.
char32_t decode_next(std::string_view text, std::size_t& pos);

// Number of leading bytes of a complete character sequence, for splitting text on characters.
inline std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace md::utf8
