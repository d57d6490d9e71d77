#include "text/jinja/unicode.h"

#include <utf8proc.h>

#include <algorithm>

#include "base/utf8.h"

namespace md::jinja::uni {

char32_t next(std::string_view text, std::size_t& pos) {
  auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t extra = lead < 0x80           ? 0
                      : (lead >> 5) == 0x6  ? 1
                      : (lead >> 4) == 0xE  ? 2
                      : (lead >> 3) == 0x1E ? 3
                                            : 4;
  // A stray or truncated byte decodes to itself so malformed data never crashes the interpreter.
  if (extra == 0 || extra == 4 || pos + extra >= text.size()) {
    ++pos;
    return lead;
  }
  char32_t cp = lead & (0x3F >> extra);
  for (std::size_t i = 1; i <= extra; ++i) {
    auto c = static_cast<unsigned char>(text[pos + i]);
    if ((c & 0xC0) != 0x80) {
      ++pos;
      return lead;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  pos += extra + 1;
  return cp;
}

std::u32string decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) out.push_back(next(text, pos));
  return out;
}

// One UTF-8 encoder for the whole project: base/utf8.h's.
void append(std::string& out, char32_t cp) {
  utf8::append(out, cp);
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append(out, cp);
  return out;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool is_valid_utf8(std::string_view text) {
  std::size_t pos = 0;
  utf8proc_int32_t cp = 0;
  while (pos < text.size()) {
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                              static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    if (n <= 0) return false;
    pos += static_cast<std::size_t>(n);
  }
  return true;
}

std::size_t length(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

static utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_alpha(char32_t cp) {
  auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}

bool is_digit(char32_t cp) {
  return category(cp) == UTF8PROC_CATEGORY_ND;
}

bool is_alnum(char32_t cp) {
  auto c = category(cp);
  return is_alpha(cp) || c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL ||
         c == UTF8PROC_CATEGORY_NO;
}

bool is_cased(char32_t cp) {
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         utf8proc_islower(static_cast<utf8proc_int32_t>(cp)) ||
         utf8proc_isupper(static_cast<utf8proc_int32_t>(cp));
}

bool is_lower_cp(char32_t cp) {
  return utf8proc_islower(static_cast<utf8proc_int32_t>(cp));
}
bool is_upper_cp(char32_t cp) {
  return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp));
}

namespace {

// One-to-many mappings from Unicode SpecialCasing.txt that Python applies and simple mapping
// tables lack; only the ones plausible in chat text are listed.
const char* special_upper(char32_t cp) {
  switch (cp) {
    case 0xDF:
      return "SS";
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    case 0x149:
      return "\xCA\xBCN";
    default:
      return nullptr;
  }
}

const char* special_title(char32_t cp) {
  switch (cp) {
    case 0xDF:
      return "Ss";
    case 0xFB00:
      return "Ff";
    case 0xFB01:
      return "Fi";
    case 0xFB02:
      return "Fl";
    case 0xFB03:
      return "Ffi";
    case 0xFB04:
      return "Ffl";
    case 0xFB05:
    case 0xFB06:
      return "St";
    default:
      return nullptr;
  }
}

void append_upper(std::string& out, char32_t cp) {
  if (const char* s = special_upper(cp)) {
    out += s;
    return;
  }
  append(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))));
}

void append_title(std::string& out, char32_t cp) {
  if (const char* s = special_title(cp)) {
    out += s;
    return;
  }
  append(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))));
}

// Python lowers capital sigma to final sigma when it ends a word (preceded by a cased letter and
// not followed by one, skipping case-ignorable marks).
bool sigma_is_final(const std::u32string& cps, std::size_t i) {
  auto ignorable = [](char32_t c) {
    auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME ||
           cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_LM ||
           cat == UTF8PROC_CATEGORY_SK || c == '\'' || c == 0x2019 || c == 0xB7;
  };
  std::size_t j = i;
  bool before = false;
  while (j > 0) {
    --j;
    if (ignorable(cps[j])) continue;
    before = is_cased(cps[j]);
    break;
  }
  if (!before) return false;
  for (std::size_t k = i + 1; k < cps.size(); ++k) {
    if (ignorable(cps[k])) continue;
    return !is_cased(cps[k]);
  }
  return true;
}

void append_lower(std::string& out, const std::u32string& cps, std::size_t i) {
  char32_t cp = cps[i];
  if (cp == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  if (cp == 0x3A3) {
    append(out, sigma_is_final(cps, i) ? 0x3C2 : 0x3C3);
    return;
  }
  append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

}  // namespace

std::string upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t cp : decode(text)) append_upper(out, cp);
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
    return out;
  }
  std::u32string cps = decode(text);
  for (std::size_t i = 0; i < cps.size(); ++i) append_lower(out, cps, i);
  return out;
}

std::string title(std::string_view text) {
  std::string out;
  std::u32string cps = decode(text);
  bool previous_cased = false;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (previous_cased) {
      append_lower(out, cps, i);
    } else {
      append_title(out, cps[i]);
    }
    previous_cased = is_cased(cps[i]);
  }
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out;
  std::u32string cps = decode(text);
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title(out, cps[i]);
    } else {
      append_lower(out, cps, i);
    }
  }
  return out;
}

std::string swapcase(std::string_view text) {
  std::string out;
  std::u32string cps = decode(text);
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (is_upper_cp(cps[i])) {
      append_lower(out, cps, i);
    } else if (is_lower_cp(cps[i])) {
      append_upper(out, cps[i]);
    } else {
      append(out, cps[i]);
    }
  }
  return out;
}

std::string strip(std::string_view text, const std::u32string* chars, bool left, bool right) {
  auto strippable = [&](char32_t cp) {
    return chars ? chars->find(cp) != std::u32string::npos : is_space(cp);
  };
  std::u32string cps = decode(text);
  std::size_t begin = 0;
  std::size_t end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

}  // namespace md::jinja::uni
