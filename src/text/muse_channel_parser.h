// Muse Spark's output split into reasoning and answer (docs/models/muse-spark-nvfp4.md §9): the
// model writes messages `<|start|>assistant to={recipient}<|message|>{body}` closed by <|eom|> or
// <|eot|>, the first one's `<|start|>assistant` already in the prompt. A body goes to reasoning
// when its header's recipient is `self` and to the answer otherwise (`user`, `commentary`); the
// headers and end markers are consumed. Needs the text with special tokens kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/channel_splitter.h"

namespace md {

class MuseChannelParser final : public ChannelSplitter {
 public:
  // `starts_in_header`: the prompt ends with `<|start|>assistant` (its generation prompt), so the
  // output begins with the rest of a header.
  explicit MuseChannelParser(bool starts_in_header);

  std::vector<Segment> push(std::string_view piece) override;
  // An unfinished header is dropped, unless no message ever started: then the whole output was
  // plain text and is the answer, markers removed (as the seed's non-streamed parse does).
  std::vector<Segment> finish() override;
  // Whether the next text would be reasoning.
  bool in_reasoning() const { return !in_header_ && body_is_reasoning_; }

  // Whether the rendered prompt ends with the generation prompt `<|start|>assistant`.
  static bool starts_in_header(std::string_view rendered_prompt);

 private:
  void consume(std::string_view text, std::vector<Segment>& out);
  void open_body();

  bool in_header_;
  bool body_is_reasoning_ = false;
  bool saw_message_ = false;
  std::string header_;    // the current header's text so far
  std::string unrouted_;  // every header's text while no message has opened (see finish)
  std::string pending_;   // text that may end in the start of a marker
  // Reasoning pieces: those of the current header (counted once it turns out to be `to=self`),
  // and whether the pieces of a `to=self` message are being counted (until its end marker).
  int64_t header_pieces_ = 0;
  bool counting_ = false;
};

}  // namespace md
