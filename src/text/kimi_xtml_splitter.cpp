#include "text/kimi_xtml_splitter.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

namespace md {

namespace {

constexpr std::string_view kOpen = "<|open|>", kClose = "<|close|>", kSep = "<|sep|>";
constexpr std::string_view kEndOfMessage = "<|end_of_msg|>";
// A tag longer than this without its <|sep|> is no tag: its text is released as text.
constexpr std::size_t kMaxTag = 4096;

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
  end_call(out);
  return out;
}

void KimiXtmlSplitter::scan(bool final, std::vector<Segment>& out) {
  for (;;) {
    std::size_t at = std::string::npos;
    for (std::string_view marker : {kOpen, kClose, kEndOfMessage})
      at = std::min(at, pending_.find(marker));
    if (at == std::string::npos) {
      const std::size_t keep =
          final ? 0 : partial_marker_length(pending_, {kOpen, kClose, kEndOfMessage});
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
    std::size_t next = std::string::npos;  // another marker before the <|sep|>: no tag here
    for (std::string_view marker : {kOpen, kClose, kEndOfMessage})
      next = std::min(next, pending_.find(marker, head));
    const bool no_tag = next < sep || (sep == std::string::npos && next != std::string::npos) ||
                        (sep == std::string::npos ? pending_.size() - head : sep - head) > kMaxTag;
    if (sep == std::string::npos && !no_tag && !final) return;  // the tag may still complete
    if (no_tag || sep == std::string::npos) {
      text(std::string_view(pending_).substr(0, head), out);  // its marker is text
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
  if (name == "think" || name == "response" || name == "tools") end_call(out);
  if (name == "think") {
    section_ = open ? Section::kThink : Section::kMessage;
  } else if (name == "response") {
    section_ = open ? Section::kResponse : Section::kMessage;
  } else if (name == "tools") {
    section_ = open ? Section::kTools : Section::kMessage;
  } else if (name == "call" && open) {
    end_call(out);  // a call left open ends before the next
    call_.emplace();
    call_->name = attribute(tag, "tool");
    section_ = Section::kCall;
  } else if (name == "call") {
    end_call(out);
    section_ = Section::kTools;
  } else if (name == "argument" && open && call_) {
    call_->key = attribute(tag, "key");
    call_->type = attribute(tag, "type");
    call_->value.clear();
    section_ = Section::kArgument;
  } else if (name == "argument" && call_) {
    end_argument();
    section_ = Section::kCall;
  } else if (name == "json" && open && call_) {
    call_->raw_json.emplace();
    section_ = Section::kJson;
  } else if (name == "json" && call_) {
    section_ = Section::kCall;
  } else if (name == "message") {
    end_call(out);
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
      append_segment(Segment::kReasoning, t, out);
      break;
    case Section::kMessage:
    case Section::kResponse:
      answer(t, out);
      break;
    case Section::kArgument:
      if (call_) call_->value.append(t);
      break;
    case Section::kJson:
      if (call_ && call_->raw_json) call_->raw_json->append(t);
      break;
    case Section::kTools:
    case Section::kCall:
      break;  // between calls and arguments: layout only
  }
}

void KimiXtmlSplitter::answer(std::string_view t, std::vector<Segment>& out) {
  append_segment(Segment::kAnswer, t, out);
}

// A typed argument's value: strings as written, other types as the JSON they are (the text
// itself where it does not parse, as vLLM's and SGLang's K3 parsers do).
void KimiXtmlSplitter::end_argument() {
  if (!call_ || section_ != Section::kArgument) return;
  nlohmann::ordered_json value = call_->value;
  if (call_->type != "string") {
    auto parsed = nlohmann::ordered_json::parse(call_->value, nullptr, false);
    if (!parsed.is_discarded()) value = std::move(parsed);
  }
  call_->arguments[call_->key] = std::move(value);
}

// The call as the JSON form of a <tool_call> block: its typed arguments, or its raw JSON block
// (an object; other text is handed on as the arguments string, which the call parser passes
// through), or {} for neither.
void KimiXtmlSplitter::end_call(std::vector<Segment>& out) {
  if (!call_) return;
  end_argument();
  nlohmann::ordered_json call = {{"name", call_->name}, {"arguments", call_->arguments}};
  if (call_->raw_json) {
    auto parsed = nlohmann::ordered_json::parse(*call_->raw_json, nullptr, false);
    if (parsed.is_object()) {
      call["arguments"] = std::move(parsed);
    } else if (call_->raw_json->find_first_not_of(" \t\r\n") != std::string::npos) {
      call["arguments"] = *call_->raw_json;
    }
  }
  call_.reset();
  section_ = Section::kTools;
  const std::string body =
      call.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  answer(fmt::format("<tool_call>\n{}\n</tool_call>\n", body), out);
}

}  // namespace md
