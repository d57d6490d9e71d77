#include "text/tokenizer_added_tokens.h"

#include <algorithm>
#include <cstring>

#include "base/utf8.h"

namespace md {
namespace {

// Start of the character that ends just before `pos` (pos > 0, text valid UTF-8).
std::size_t previous_char_start(std::string_view text, std::size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

// Moves `begin` left over whitespace, not past `floor`.
std::size_t strip_left(std::string_view text, std::size_t begin, std::size_t floor) {
  while (begin > floor) {
    const std::size_t prev = previous_char_start(text, begin);
    std::size_t p = prev;
    if (!is_unicode_whitespace(utf8::decode_next(text, p))) break;
    begin = prev;
  }
  return begin;
}

// Moves `end` right over whitespace.
std::size_t strip_right(std::string_view text, std::size_t end) {
  while (end < text.size()) {
    std::size_t next = end;
    if (!is_unicode_whitespace(utf8::decode_next(text, next))) break;
    end = next;
  }
  return end;
}

}  // namespace

bool is_unicode_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
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
      return c >= 0x2000 && c <= 0x200A;
  }
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  // Empty contents can never match and would loop forever.
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if (!by_first_byte_[b].empty()) {
      ++distinct;
      single_first_byte_ = b;
    }
  }
  if (distinct != 1) single_first_byte_ = -1;
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

int AddedTokenMatcher::longest_at(std::string_view text, std::size_t pos) const {
  const std::size_t left = text.size() - pos;
  for (int index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const std::string& content = tokens_[index].content;
    if (content.size() <= left &&
        std::memcmp(text.data() + pos, content.data(), content.size()) == 0) {
      return index;
    }
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, bool skip_special,
                              std::vector<TextSegment>& out) const {
  std::size_t segment_start = 0;  // first byte not yet assigned to a segment
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (single_first_byte_ >= 0) {
      const void* hit = std::memchr(text.data() + pos, single_first_byte_, text.size() - pos);
      if (!hit) break;
      pos = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    } else if (by_first_byte_[static_cast<unsigned char>(text[pos])].empty()) {
      ++pos;
      continue;
    }
    const int index = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t end = pos + token.content.size();
    if (skip_special && token.special) {
      pos = end;  // consumed by the match, as HF's non-overlapping search does
      continue;
    }
    const std::size_t begin = token.lstrip ? strip_left(text, pos, segment_start) : pos;
    if (token.rstrip) end = strip_right(text, end);
    if (begin > segment_start) out.push_back({text.substr(segment_start, begin - segment_start)});
    out.push_back({text.substr(begin, end - begin), token.id});
    segment_start = pos = end;
  }
  if (segment_start < text.size()) out.push_back({text.substr(segment_start)});
}

}  // namespace md
