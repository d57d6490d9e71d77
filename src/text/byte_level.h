// GPT-2's byte-level alphabet: every byte maps to one printable Unicode character, so that
// byte-level BPE vocabularies (HF ByteLevel pre-tokenizer/decoder) can store arbitrary bytes as
// JSON strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace md::byte_level {

// The character that stands for `byte` (printable ASCII and most of Latin-1 map to themselves,
// the rest to U+0100.. in byte order).
char32_t byte_to_char(std::uint8_t byte);

// The byte that `c` stands for, or nullopt when `c` is not in the alphabet.
std::optional<std::uint8_t> char_to_byte(char32_t c);

// Raw bytes -> byte-level string (UTF-8).
std::string encode(std::string_view bytes);

// Byte-level string -> raw bytes; nullopt when `text` is not valid UTF-8 or has a character
// outside the alphabet (HF's ByteLevel decoder then keeps such a token's text as is).
std::optional<std::string> decode(std::string_view text);

}  // namespace md::byte_level
