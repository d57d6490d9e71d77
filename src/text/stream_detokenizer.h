// Turns a stream of generated token ids into text as it arrives: emits only complete UTF-8
// characters, never re-emits, and concatenates to exactly Tokenizer::decode of all the ids.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace md {

class StreamDetokenizer {
 public:
  // `tokenizer` must outlive this object. With skip_special, special tokens produce no text, but
  // for those in `kept_special` (a chat format's markers that a parser reads from the text).
  explicit StreamDetokenizer(const Tokenizer& tokenizer, bool skip_special = false,
                             std::vector<std::int32_t> kept_special = {})
      : tokenizer_(&tokenizer),
        skip_special_(skip_special),
        kept_special_(std::move(kept_special)) {}

  // Adds one token; returns the text it completes (often empty while a multi-byte character is
  // split across tokens). Invalid bytes become U+FFFD as soon as they are known to be invalid.
  std::string push(std::int32_t id);

  // Ends the stream: an incomplete trailing character becomes one U+FFFD. The object can then be
  // reused for a new stream.
  std::string finish();

  // Bytes held back because they may be the start of a character still being generated.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<std::int32_t> kept_special_;
  std::string pending_;
};

}  // namespace md
