#include "text/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace md::byte_level {
namespace {

// Bytes that represent themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'.
constexpr bool is_self_mapped(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> make_byte_to_char() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) table[b] = is_self_mapped(b) ? char32_t(b) : next++;
  return table;
}

constexpr std::array<char32_t, 256> kByteToChar = make_byte_to_char();

// Every alphabet character is below U+0144, so the inverse is a small dense table.
constexpr char32_t kInverseSize = 0x144;
constexpr std::array<std::int16_t, kInverseSize> make_char_to_byte() {
  std::array<std::int16_t, kInverseSize> table{};
  for (auto& entry : table) entry = -1;
  for (unsigned b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<std::int16_t>(b);
  return table;
}

constexpr std::array<std::int16_t, kInverseSize> kCharToByte = make_char_to_byte();

}  // namespace

char32_t byte_to_char(std::uint8_t byte) {
  return kByteToChar[byte];
}

std::optional<std::uint8_t> char_to_byte(char32_t c) {
  if (c >= kInverseSize || kCharToByte[c] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kCharToByte[c]);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) utf8::append(out, kByteToChar[static_cast<std::uint8_t>(b)]);
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  if (!utf8::is_valid(text)) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = char_to_byte(utf8::decode_next(text, pos));
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
  }
  return out;
}

}  // namespace md::byte_level
