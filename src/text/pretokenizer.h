// The HF pre-tokenizer stage of a byte-level BPE tokenizer: regex Split steps (Isolated) and the
// ByteLevel step (optional GPT-2 regex and prefix space); turns text into the pieces BPE encodes.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/pretokenizer_regex.h"

namespace md {

struct PreTokenizerSpec {
  struct Split {
    std::string pattern;   // as written in tokenizer.json (Oniguruma syntax) or a literal string
    bool literal = false;  // {"String": ...} patterns
  };
  std::vector<Split> splits;      // applied in order, each to every piece so far
  bool byte_level_regex = false;  // ByteLevel(use_regex=true): GPT-2's regex runs last
  bool add_prefix_space = false;  // ByteLevel: prepend ' ' to each piece it receives
};

// GPT-2's pre-tokenizer regex, used by ByteLevel(use_regex=true).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  explicit PreTokenizer(const PreTokenizerSpec& spec);

  // Appends the pieces of `text` (valid UTF-8) to `pieces`. Pieces point into `text`, or into
  // `storage` when a prefix space had to be added.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& storage) const;

 private:
  std::vector<std::unique_ptr<PretokenizerRegex>> splits_;
  std::unique_ptr<PretokenizerRegex> byte_level_regex_;  // null unless use_regex=true
  bool add_prefix_space_ = false;
};

}  // namespace md
