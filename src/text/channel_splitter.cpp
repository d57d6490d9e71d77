#include "text/channel_splitter.h"

#include <algorithm>

#include "text/kimi_xtml_splitter.h"
#include "text/muse_channel_parser.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer.h"

namespace md {

void append_segment(ChannelSplitter::Segment::Kind kind, std::string_view text,
                    std::vector<ChannelSplitter::Segment>& out) {
  if (text.empty()) return;
  if (!out.empty() && out.back().kind == kind) {
    out.back().text += text;
  } else {
    out.push_back({kind, std::string(text)});
  }
}

std::size_t partial_marker_length(std::string_view text,
                                  std::initializer_list<std::string_view> markers) {
  std::size_t longest = 0;
  for (const std::string_view marker : markers) {
    for (std::size_t n = std::min(text.size(), marker.size() - 1); n > longest; --n) {
      if (text.ends_with(marker.substr(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

ChannelFormat channel_format_of_template(std::string_view source) {
  if (source.find("<|message|>") != std::string_view::npos &&
      source.find("to=self") != std::string_view::npos) {
    return ChannelFormat::kMuseHeaders;
  }
  if (source.find("<|open|>") != std::string_view::npos &&
      source.find("<|close|>") != std::string_view::npos &&
      source.find("<|sep|>") != std::string_view::npos) {
    return ChannelFormat::kKimiXtml;
  }
  if (source.find("<think>") != std::string_view::npos) return ChannelFormat::kThinkTags;
  return ChannelFormat::kNone;
}

std::vector<int32_t> channel_marker_ids(ChannelFormat format, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  std::vector<const char*> markers;
  if (format == ChannelFormat::kMuseHeaders)
    markers = {"<|start|>", "<|message|>", "<|eom|>", "<|eot|>"};
  if (format == ChannelFormat::kKimiXtml)
    markers = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
  for (const char* marker : markers) {
    if (std::optional<int32_t> id = tokenizer.token_id(marker)) ids.push_back(*id);
  }
  return ids;
}

std::unique_ptr<ChannelSplitter> make_channel_splitter(ChannelFormat format,
                                                       std::string_view rendered_prompt) {
  switch (format) {
    case ChannelFormat::kThinkTags:
      return std::make_unique<ReasoningParser>(
          ReasoningParser::starts_in_reasoning(rendered_prompt));
    case ChannelFormat::kMuseHeaders:
      return std::make_unique<MuseChannelParser>(
          MuseChannelParser::starts_in_header(rendered_prompt));
    case ChannelFormat::kKimiXtml:
      return std::make_unique<KimiXtmlSplitter>(KimiXtmlSplitter::start_of(rendered_prompt));
    case ChannelFormat::kNone:
      break;
  }
  return nullptr;
}

}  // namespace md
