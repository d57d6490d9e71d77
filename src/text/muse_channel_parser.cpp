#include "text/muse_channel_parser.h"

#include <algorithm>
#include <array>

namespace md {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::array<std::string_view, 2> kEnds = {"<|eom|>", "<|eot|>"};
constexpr std::string_view kAssistant = "assistant";

std::string_view trim(std::string_view s) {
  const std::size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const std::size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

}  // namespace

MuseChannelParser::MuseChannelParser(bool starts_in_header) : in_header_(starts_in_header) {}

bool MuseChannelParser::starts_in_header(std::string_view rendered_prompt) {
  return trim(rendered_prompt).ends_with(std::string(kStart) + std::string(kAssistant));
}

// The recipient decides: `to=self` is reasoning, any other is the answer.
void MuseChannelParser::open_body() {
  std::string_view header = trim(header_);
  if (header.starts_with(kAssistant)) header.remove_prefix(kAssistant.size());
  body_is_reasoning_ = trim(header) == "to=self";
  in_header_ = false;
  saw_message_ = true;
  header_.clear();
}

void MuseChannelParser::consume(std::string_view text, std::vector<Segment>& out) {
  if (in_header_) {
    header_ += text;
    if (!saw_message_) unrouted_ += text;
  } else {
    append_segment(body_is_reasoning_ ? Segment::kReasoning : Segment::kAnswer, text, out);
  }
}

std::vector<ChannelSplitter::Segment> MuseChannelParser::push(std::string_view piece) {
  // Each piece is one token: those of a `to=self` message, header and end marker included, are
  // reasoning; a header's are known to be only when its <|message|> arrives.
  bool counted = false;
  auto count = [&] {
    if (!counted) ++reasoning_pieces_;
    counted = true;
  };
  if (counting_) {
    count();
  } else if (in_header_) {
    ++header_pieces_;
  }
  pending_ += piece;
  std::vector<Segment> out;
  for (;;) {
    std::size_t at = std::string::npos;
    std::string_view marker;
    for (const std::string_view m : {kStart, kMessage, kEnds[0], kEnds[1]}) {
      const std::size_t found = pending_.find(m);
      if (found < at) {
        at = found;
        marker = m;
      }
    }
    if (at == std::string::npos) break;
    consume(std::string_view(pending_).substr(0, at), out);
    pending_.erase(0, at + marker.size());
    if (marker == kStart) {
      in_header_ = true;
      header_.clear();
      counting_ = false;
      header_pieces_ = counted ? 0 : 1;
    } else if (marker == kMessage) {
      open_body();
      if (body_is_reasoning_) {
        reasoning_pieces_ += header_pieces_;
        counted = counted || header_pieces_ > 0;
        counting_ = true;
      }
      header_pieces_ = 0;
    } else if (counting_) {
      count();  // the end marker of a `to=self` message
      counting_ = false;
    }
    // An end marker closes the message; text before the next <|start|> stays in its channel.
  }
  const std::size_t keep = partial_marker_length(pending_, {kStart, kMessage, kEnds[0], kEnds[1]});
  consume(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::vector<ChannelSplitter::Segment> MuseChannelParser::finish() {
  std::vector<Segment> out;
  consume(pending_, out);
  pending_.clear();
  if (!saw_message_) append_segment(Segment::kAnswer, unrouted_, out);
  header_.clear();
  unrouted_.clear();
  return out;
}

}  // namespace md
