// Stop strings over streamed text: emits what is safe to show now, holds back a tail that could
// still grow into a stop string (and any incomplete UTF-8 character), and cuts the text before
// the first stop string to complete; the stop string itself is never emitted (OpenAI semantics).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace md::engine {

struct StopStringOutput {
  std::string emit;      // text safe to send to the client now
  bool stopped = false;  // a stop string completed; nothing more will be emitted
};

class StopStringMatcher {
 public:
  static constexpr std::size_t kMaxStrings = 16;
  static constexpr std::size_t kMaxBytes = 1024;  // the OpenAI limit the server validates

  // Throws md::Error (naming the index) for an empty or over-long stop string, or too many.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Feeds the next piece of decoded text. When several stop strings could match, the one that
  // completes first in the stream wins; among those completing on the same byte, the longest.
  StopStringOutput push(std::string_view piece);
  // End of generation: returns whatever is still held back (empty after a stop).
  std::string finish();

  bool stopped() const { return matched_ >= 0; }
  // Index of the stop string that ended the text, or -1.
  int matched_index() const { return matched_; }

 private:
  // Streaming Knuth–Morris–Pratt per stop string: state = length of the longest prefix of the
  // stop string that is a suffix of all text seen so far. Linear in the text, with no rescans.
  struct Pattern {
    std::string text;
    std::vector<std::size_t> fallback;  // KMP failure function
    std::size_t state = 0;
  };
  static Pattern compile(std::string text);
  static std::size_t advance(Pattern& p, char byte);

  std::vector<Pattern> patterns_;
  std::string held_;  // received but not yet emitted
  int matched_ = -1;
};

}  // namespace md::engine
