#include "base/utf8.h"

#include <cstring>

namespace md::utf8 {
namespace {

// Range of the second byte allowed after `lead` (Unicode Table 3-7); the other continuation
// bytes are always 0x80..0xBF. Returns false for bytes that cannot start a sequence.
bool second_byte_range(unsigned char lead, unsigned char& lo, unsigned char& hi, std::size_t& n) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return false;
  }
  return true;
}

}  // namespace

Step classify(std::string_view bytes, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(bytes[pos]);
  if (lead < 0x80) return {Step::kValid, 1};
  unsigned char lo = 0, hi = 0;
  std::size_t need = 0;
  if (!second_byte_range(lead, lo, hi, need)) return {Step::kInvalid, 1};
  std::size_t have = 1;
  while (have < need) {
    if (pos + have >= bytes.size()) return {Step::kIncomplete, have};
    const auto b = static_cast<unsigned char>(bytes[pos + have]);
    if (b < lo || b > hi) return {Step::kInvalid, have};
    lo = 0x80;
    hi = 0xBF;
    ++have;
  }
  return {Step::kValid, need};
}

bool is_valid(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    // Skip ASCII eight bytes at a time: most text is mostly ASCII.
    std::uint64_t word;
    if (pos + 8 <= bytes.size() &&
        (std::memcpy(&word, bytes.data() + pos, 8), (word & 0x8080808080808080ull) == 0)) {
      pos += 8;
      continue;
    }
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Step step = classify(bytes, pos);
    if (step.kind != Step::kValid) return false;
    pos += step.length;
  }
  return true;
}

std::string repair(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const Step step = classify(bytes, pos);
    if (step.kind == Step::kValid) {
      out.append(bytes.substr(pos, step.length));
    } else {
      out.append(kReplacement);
    }
    pos += step.length;
  }
  return out;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t decode_next(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const std::size_t n = sequence_length(lead);
  char32_t cp = n == 1 ? lead : n == 2 ? (lead & 0x1F) : n == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (std::size_t i = 1; i < n; ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  }
  pos += n;
  return cp;
}

}  // namespace md::utf8
