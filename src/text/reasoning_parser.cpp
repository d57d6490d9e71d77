#include "text/reasoning_parser.h"

#include <algorithm>

#include "base/error.h"

namespace md {
namespace {

bool is_newline(char c) {
  return c == '\n' || c == '\r';
}

// Length of the longest proper prefix of `tag` that `text` ends with.
std::size_t suffix_prefix_length(std::string_view text, std::string_view tag) {
  std::size_t longest = std::min(text.size(), tag.size() - 1);
  for (std::size_t length = longest; length > 0; --length) {
    if (text.ends_with(tag.substr(0, length))) return length;
  }
  return 0;
}

}  // namespace

ReasoningParser::ReasoningParser(bool starts_in_reasoning, ReasoningTags tags)
    : tags_(std::move(tags)), in_reasoning_(starts_in_reasoning), after_tag_(starts_in_reasoning) {
  // An empty tag would match everywhere and never let the stream advance.
  if (tags_.open.empty() || tags_.close.empty()) fail("reasoning tags must not be empty");
}

std::vector<ReasoningParser::Segment> ReasoningParser::push(std::string_view piece) {
  // A token counts as reasoning up to and including the one that closes it.
  if (in_reasoning_) ++reasoning_pieces_;
  pending_ += piece;
  std::vector<Segment> out;
  for (;;) {
    std::size_t open = pending_.find(tags_.open);
    std::size_t close = pending_.find(tags_.close);
    if (open == std::string::npos && close == std::string::npos) break;
    bool is_open = open < close || (open == close && tags_.open.size() > tags_.close.size());
    std::size_t at = is_open ? open : close;
    emit(std::string_view(pending_).substr(0, at), out);
    pending_.erase(0, at + (is_open ? tags_.open : tags_.close).size());
    in_reasoning_ = is_open;
    after_tag_ = true;
  }
  std::size_t keep = partial_tag_length();
  emit(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::vector<ReasoningParser::Segment> ReasoningParser::finish() {
  std::vector<Segment> out;
  emit(pending_, out);
  pending_.clear();
  return out;
}

bool ReasoningParser::starts_in_reasoning(std::string_view rendered_prompt,
                                          const ReasoningTags& tags) {
  std::size_t end = rendered_prompt.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  return rendered_prompt.substr(0, end + 1).ends_with(tags.open);
}

void ReasoningParser::emit(std::string_view text, std::vector<Segment>& out) {
  if (after_tag_) {
    std::size_t skip = 0;
    while (skip < text.size() && is_newline(text[skip])) ++skip;
    text.remove_prefix(skip);
    if (!text.empty()) after_tag_ = false;
  }
  if (text.empty()) return;
  Segment::Kind kind = in_reasoning_ ? Segment::kReasoning : Segment::kAnswer;
  if (!out.empty() && out.back().kind == kind) {
    out.back().text += text;
  } else {
    out.push_back(Segment{kind, std::string(text)});
  }
}

std::size_t ReasoningParser::partial_tag_length() const {
  return std::max(suffix_prefix_length(pending_, tags_.open),
                  suffix_prefix_length(pending_, tags_.close));
}

}  // namespace md
