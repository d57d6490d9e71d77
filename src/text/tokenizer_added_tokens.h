// Finds added/special tokens (e.g. <|im_start|>) in text before pre-tokenization, with HF
// AddedVocabulary semantics: leftmost-longest, non-overlapping, optional lstrip/rstrip.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace md {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false;     // special tokens are skipped when parse_special is false / skip_special
  bool lstrip = false;      // the match also swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched against normalized text (after NFC) instead of raw text
};

// A stretch of the input: an added token (id >= 0) or plain text to pre-tokenize (id < 0).
struct TextSegment {
  std::string_view text;
  std::int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Splits `text` into segments. Matches are found leftmost-longest over all tokens; when
  // `skip_special` is set, a match of a special token is left as text (and, as in HF, the
  // text it covers is not searched again for shorter tokens).
  void split(std::string_view text, bool skip_special, std::vector<TextSegment>& out) const;

 private:
  // Longest token matching at text[pos], or -1.
  int longest_at(std::string_view text, std::size_t pos) const;

  std::vector<AddedToken> tokens_;
  // For each first byte, indices into tokens_ sorted by decreasing length.
  std::array<std::vector<int>, 256> by_first_byte_;
  int single_first_byte_ = -1;  // when all tokens start with the same byte (e.g. '<'): memchr
};

// Unicode White_Space (what HF's lstrip/rstrip strip: Rust's char::is_whitespace).
bool is_unicode_whitespace(char32_t c);

}  // namespace md
