#include "text/kimi_xtml_splitter.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

namespace md {

namespace {

constexpr std::string_view kOpen = "<|open|>", kClose = "<|close|>", kSep = "<|sep|>";
constexpr std::string_view kEndOfMessage = "<|end_of_msg|>";
constexpr std::array<std::string_view, 3> kMarkers = {kOpen, kClose, kEndOfMessage};
// A tag longer than this without its <|sep|> is no tag: its text is released as text.
constexpr std::size_t kMaxTag = 4096;

void add(ChannelSplitter::Segment::Kind kind, std::string_view text,
         std::vector<ChannelSplitter::Segment>& out) {
  if (text.empty()) return;
  if (!out.empty() && out.back().kind == kind) {
    out.back().text += text;
  } else {
    out.push_back({kind, std::string(text)});
  }
}

// The length of the longest suffix of `text` that begins a marker.
std::size_t partial_marker(std::string_view text) {
  std::size_t longest = 0;
  for (std::string_view marker : kMarkers) {
    for (std::size_t n = std::min(marker.size() - 1, text.size()); n > longest; --n) {
      if (text.substr(text.size() - n) == marker.substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

// The value of attribute `key` in a tag's text (`call tool="a&amp;b" index="1"`), unescaped.
std::string attribute(std::string_view tag, std::string_view key) {
  const std::string needle = fmt::format(" {}=\"", key);
  const std::size_t at = tag.find(needle);
  if (at == std::string_view::npos) return {};
  const std::size_t begin = at + needle.size(), end = tag.find('"', begin);
  std::string_view raw = tag.substr(begin, end == std::string_view::npos ? end : end - begin);
  std::string out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw.substr(i).starts_with("&quot;")) {
      out += '"';
      i += 5;
    } else if (raw.substr(i).starts_with("&amp;")) {
      out += '&';
      i += 4;
    } else {
      out += raw[i];
    }
  }
  return out;
}

std::string_view tag_name(std::string_view tag) {
  return tag.substr(0, tag.find(' '));
}

}  // namespace

KimiXtmlSplitter::KimiXtmlSplitter(Section start) : section_(start) {}

KimiXtmlSplitter::Section KimiXtmlSplitter::start_of(std::string_view prompt) {
  const std::size_t end = prompt.find_last_not_of(" \t\r\n");
  prompt = prompt.substr(0, end == std::string_view::npos ? 0 : end + 1);
  if (prompt.ends_with("<|open|>think<|sep|>")) return Section::kThink;
  if (prompt.ends_with("<|open|>response<|sep|>")) return Section::kResponse;
  return Section::kMessage;
}

std::vector<ChannelSplitter::Segment> KimiXtmlSplitter::push(std::string_view piece) {
  if (section_ == Section::kThink) ++reasoning_pieces_;
  pending_ += piece;
  std::vector<Segment> out;
  scan(false, out);
  return out;
}

std::vector<ChannelSplitter::Segment> KimiXtmlSplitter::finish() {
  std::vector<Segment> out;
  scan(true, out);
  if (call_started_ || section_ == Section::kCall || section_ == Section::kArgument ||
      section_ == Section::kJson) {
    if (section_ == Section::kArgument) answer("\n</parameter>\n", out);
    end_call(out);
  }
  return out;
}

void KimiXtmlSplitter::scan(bool final, std::vector<Segment>& out) {
  for (;;) {
    std::size_t at = std::string::npos;
    for (std::string_view marker : kMarkers) at = std::min(at, pending_.find(marker));
    if (at == std::string::npos) {
      const std::size_t keep = final ? 0 : partial_marker(pending_);
      text(std::string_view(pending_).substr(0, pending_.size() - keep), out);
      pending_.erase(0, pending_.size() - keep);
      return;
    }
    text(std::string_view(pending_).substr(0, at), out);
    pending_.erase(0, at);
    if (pending_.starts_with(kEndOfMessage)) {
      pending_.erase(0, kEndOfMessage.size());
      continue;
    }
    const bool open = pending_.starts_with(kOpen);
    const std::size_t head = open ? kOpen.size() : kClose.size();
    const std::size_t sep = pending_.find(kSep, head);
    if (sep == std::string::npos || sep - head > kMaxTag) {
      if (!final && pending_.size() - head <= kMaxTag) return;  // the tag may still complete
      text(std::string_view(pending_).substr(0, head), out);    // no tag: its marker is text
      pending_.erase(0, head);
      continue;
    }
    const std::string tag = pending_.substr(head, sep - head);
    pending_.erase(0, sep + kSep.size());
    on_tag(tag, open, out);
  }
}

void KimiXtmlSplitter::on_tag(std::string_view tag, bool open, std::vector<Segment>& out) {
  const std::string_view name = tag_name(tag);
  if (name == "think") {
    section_ = open ? Section::kThink : Section::kMessage;
  } else if (name == "response") {
    section_ = open ? Section::kResponse : Section::kMessage;
  } else if (name == "tools") {
    section_ = open ? Section::kTools : Section::kMessage;
  } else if (name == "call" && open) {
    if (call_started_) end_call(out);  // a call left open: close it before the next
    call_name_ = attribute(tag, "tool");
    section_ = Section::kCall;
  } else if (name == "call") {
    end_call(out);
    section_ = Section::kTools;
  } else if (name == "argument" && open) {
    start_call(false, out);
    answer(fmt::format("<parameter={}>\n", attribute(tag, "key")), out);
    section_ = Section::kArgument;
  } else if (name == "argument") {
    answer("\n</parameter>\n", out);
    section_ = Section::kCall;
  } else if (name == "json" && open) {
    start_call(true, out);
    section_ = Section::kJson;
  } else if (name == "json") {
    section_ = Section::kCall;
  } else if (name == "message") {
    section_ = Section::kMessage;
  } else {
    // Not a tag of the format: the model's text, markers included.
    std::string raw(open ? kOpen : kClose);
    raw.append(tag).append(kSep);
    text(raw, out);
  }
}

void KimiXtmlSplitter::text(std::string_view t, std::vector<Segment>& out) {
  switch (section_) {
    case Section::kThink:
      add(Segment::kReasoning, t, out);
      break;
    case Section::kMessage:
    case Section::kResponse:
    case Section::kArgument:
    case Section::kJson:
      answer(t, out);
      break;
    case Section::kTools:
    case Section::kCall:
      break;  // between calls and arguments: layout only
  }
}

void KimiXtmlSplitter::answer(std::string_view t, std::vector<Segment>& out) {
  add(Segment::kAnswer, t, out);
}

void KimiXtmlSplitter::start_call(bool json, std::vector<Segment>& out) {
  if (call_started_) return;
  call_started_ = true;
  call_json_ = json;
  if (json) {
    answer(fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": ",
                       nlohmann::json(call_name_).dump()),
           out);
  } else {
    answer(fmt::format("<tool_call>\n<function={}>\n", call_name_), out);
  }
}

void KimiXtmlSplitter::end_call(std::vector<Segment>& out) {
  if (!call_started_) start_call(false, out);
  answer(call_json_ ? "}\n</tool_call>\n" : "</function>\n</tool_call>\n", out);
  call_started_ = false;
}

}  // namespace md
