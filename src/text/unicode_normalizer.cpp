#include "text/unicode_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "base/error.h"
#include "base/utf8.h"

namespace md {
namespace {

// Code points below U+0300 are starters that never change under NFC or combine with what
// precedes them; their UTF-8 lead bytes are all below 0xCC.
constexpr unsigned char kFirstUnsafeLead = 0xCC;

bool is_hangul_vowel_or_trailing_jamo(char32_t cp) {
  return (cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2);
}

// A "stable" character is a starter with NFC_Quick_Check=Yes that has no canonical
// decomposition: NFC leaves it unchanged and no text can combine across the boundary before it.
bool is_stable(char32_t cp) {
  if (cp < 0x300) return true;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  const bool can_be_second = p->comb_index >= 0x8000 && p->comb_index != 0xFFFF;
  if (can_be_second || is_hangul_vowel_or_trailing_jamo(cp)) return false;
  const bool canonical_decomposition = p->decomp_seqindex != 0xFFFF && p->decomp_type == 0;
  return !canonical_decomposition;
}

// Position of the first unstable character at or after `pos`, or text.size().
std::size_t find_unstable(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < kFirstUnsafeLead) {
      ++pos;
      continue;
    }
    std::size_t next = pos;
    if (!is_stable(utf8::decode_next(text, next))) return pos;
    pos = next;
  }
  return text.size();
}

// Start of the character that precedes `pos` (pos > 0, text valid UTF-8).
std::size_t previous_char(std::string_view text, std::size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

// End of the run of unstable characters that starts at `pos`.
std::size_t skip_unstable(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    std::size_t next = pos;
    if (is_stable(utf8::decode_next(text, next))) return pos;
    pos = next;
  }
  return pos;
}

void append_nfc_with_utf8proc(std::string_view chunk, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data()),
                              static_cast<utf8proc_ssize_t>(chunk.size()), &result,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
  std::free(result);
}

}  // namespace

bool nfc_may_change(std::string_view text) {
  return find_unstable(text, 0) < text.size();
}

std::string nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t unstable = find_unstable(text, pos);
    if (unstable == text.size()) {
      out.append(text.substr(pos));
      break;
    }
    // The stable starter just before the unstable run may compose with it, so it joins the chunk.
    const std::size_t chunk_begin = unstable > pos ? previous_char(text, unstable) : pos;
    const std::size_t chunk_end = skip_unstable(text, unstable);
    out.append(text.substr(pos, chunk_begin - pos));
    append_nfc_with_utf8proc(text.substr(chunk_begin, chunk_end - chunk_begin), out);
    pos = chunk_end;
  }
  return out;
}

}  // namespace md
