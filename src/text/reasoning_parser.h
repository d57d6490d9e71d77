// Splits streamed model text into reasoning (inside <think>...</think>) and answer, as pieces
// arrive: the ChannelSplitter of chat formats with think tags. Shared by the terminal chat and the
// HTTP server (OpenAI `reasoning_content`), so it knows nothing about how either shows the two.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/channel_splitter.h"

namespace md {

struct ReasoningTags {
  std::string open = "<think>";
  std::string close = "</think>";
};

class ReasoningParser final : public ChannelSplitter {
 public:
  using Segment = ChannelSplitter::Segment;

  // `starts_in_reasoning`: the prompt already opened the reasoning block (see the helper below).
  explicit ReasoningParser(bool starts_in_reasoning, ReasoningTags tags = {});

  // Adds a piece of the stream; returns the text it completes, adjacent pieces of one kind
  // merged. Tags are consumed, never returned: an open tag starts reasoning, a close tag starts
  // the answer. A piece ending in what may be the start of a tag is held back until the next
  // piece decides. Newlines right after a tag (the templates' "<think>\n", "</think>\n\n"), or
  // at the start of a stream that begins inside reasoning, are dropped. Feeding the stream in
  // any split gives the same concatenated text.
  std::vector<Segment> push(std::string_view piece) override;

  // Ends the stream: a held-back partial tag is plain text after all.
  std::vector<Segment> finish() override;

  bool in_reasoning() const { return in_reasoning_; }

  // True when the rendered prompt ends with an open tag (trailing whitespace ignored), i.e. the
  // model's first token is already reasoning.
  static bool starts_in_reasoning(std::string_view rendered_prompt, const ReasoningTags& tags = {});

 private:
  void emit(std::string_view text, std::vector<Segment>& out);
  std::size_t partial_tag_length() const;

  ReasoningTags tags_;
  bool in_reasoning_;
  bool after_tag_;       // drop newlines until the next other character
  std::string pending_;  // text not yet known to be free of a tag
};

}  // namespace md
