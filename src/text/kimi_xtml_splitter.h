// Kimi K3's output split into reasoning and answer (text/kimi_xtml_chat.h's format): the
// generation prompt opens the assistant message and its think section (or, with thinking off,
// its response section); the model writes `REASONING<|close|>think<|sep|><|open|>response<|sep|>
// TEXT<|close|>response<|sep|>`, optionally a tools section of calls with typed arguments, then
// `<|close|>message<|sep|>` and <|end_of_msg|>. Think text is reasoning, response text the
// answer; tags are consumed. Each tool call is handed on inside the answer as the
// <tool_call> block text/tool_call_parser.h reads, in its JSON form (typed arguments as JSON of
// their type, a raw JSON argument block as the arguments), once the call is complete, so the
// server's call parsing, streaming and ids are the ones every model uses. Needs the text with the
// markers kept.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/channel_splitter.h"

namespace md {

// A tool call being read: handed on whole when it closes (or its tools section, its message or
// the stream ends). At namespace scope: clang does not yet see a nested class with member
// initialisers as default-constructible inside its enclosing class (std::optional::emplace).
struct KimiXtmlCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  std::string key, type, value;         // the argument being read
  std::optional<std::string> raw_json;  // a raw JSON argument block
};

class KimiXtmlSplitter final : public ChannelSplitter {
 public:
  enum class Section { kMessage, kThink, kResponse, kTools, kCall, kArgument, kJson };

  explicit KimiXtmlSplitter(Section start);
  // The section the output starts in: the last one the rendered prompt opened (think or
  // response), else the message level (its text is answer).
  static Section start_of(std::string_view rendered_prompt);

  std::vector<Segment> push(std::string_view piece) override;
  // Held text is plain text after all; an unfinished call is closed, so that the call parser
  // sees its block and decides (it accepts a block whose body is complete).
  std::vector<Segment> finish() override;

 private:
  void scan(bool final, std::vector<Segment>& out);
  void on_tag(std::string_view tag, bool open, std::vector<Segment>& out);
  void text(std::string_view text, std::vector<Segment>& out);
  void answer(std::string_view text, std::vector<Segment>& out);
  void end_argument();
  void end_call(std::vector<Segment>& out);

  Section section_;
  std::string pending_;  // text that may hold the start of a marker or an unfinished tag
  std::optional<KimiXtmlCall> call_;
};

}  // namespace md
