// Splits streamed model text into reasoning and answer, as pieces arrive, in whichever way the
// model's chat format marks them: <think> … </think> tags (Qwen, DeepSeek; reasoning_parser.h),
// Muse Spark's message headers, `<|start|>assistant to=self<|message|>…<|eom|>`
// (muse_channel_parser.h), or Kimi K3's think and response sections (kimi_xtml_splitter.h). The
// terminal chat and the server use it without knowing which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace md {

enum class ChannelFormat {
  kNone,         // no reasoning markers: everything is the answer
  kThinkTags,    // <think> … </think>
  kMuseHeaders,  // <|start|>{role} to={recipient}<|message|>{body}<|eom|> or <|eot|>
  kKimiXtml,     // <|open|>think<|sep|> … <|close|>think<|sep|><|open|>response<|sep|> … (K3)
};

class ChannelSplitter {
 public:
  struct Segment {
    enum Kind { kReasoning, kAnswer };
    Kind kind = kAnswer;
    std::string text;
    bool operator==(const Segment&) const = default;
  };

  virtual ~ChannelSplitter() = default;
  // Adds a piece of the stream; returns the text it completes, adjacent pieces of one kind
  // merged. Markers are consumed, never returned; a piece ending in what may be the start of a
  // marker is held back until the next piece decides. Any split of the stream gives the same
  // concatenated output.
  virtual std::vector<Segment> push(std::string_view piece) = 0;
  // Ends the stream.
  virtual std::vector<Segment> finish() = 0;
  // How many of the pieces pushed so far (one per generated token, empty ones included) belong
  // to reasoning, its markers included: what `completion_tokens_details.reasoning_tokens` reports.
  int64_t reasoning_pieces() const { return reasoning_pieces_; }

 protected:
  int64_t reasoning_pieces_ = 0;
};

// Appends `text` of `kind` to `out`, merged into the last segment when that is of the same kind
// (the splitters' outputs are runs of one kind).
void append_segment(ChannelSplitter::Segment::Kind kind, std::string_view text,
                    std::vector<ChannelSplitter::Segment>& out);
// The length of the longest proper prefix of one of `markers` that `text` ends with: what a
// splitter holds back until the next piece tells whether a marker starts there.
std::size_t partial_marker_length(std::string_view text,
                                  std::initializer_list<std::string_view> markers);

// The format a chat template writes, read from its source: Muse's headers where it writes
// `<|message|>` and a `to=self` recipient, Kimi K3's sections where it writes <|open|>,
// <|close|> and <|sep|>, think tags where it writes <think>.
ChannelFormat channel_format_of_template(std::string_view template_source);

class Tokenizer;

// The special tokens the splitter of `format` reads from the text, which the detokenizer must
// therefore keep (Muse's header and end markers, Kimi K3's markers; none for think tags, which
// are plain text).
std::vector<int32_t> channel_marker_ids(ChannelFormat format, const Tokenizer& tokenizer);

// A splitter for `format` after `rendered_prompt` (which tells whether the output starts inside
// reasoning or inside a header). kNone: null.
std::unique_ptr<ChannelSplitter> make_channel_splitter(ChannelFormat format,
                                                       std::string_view rendered_prompt);

}  // namespace md
