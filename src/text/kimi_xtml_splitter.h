// Kimi K3's output split into reasoning and answer (text/kimi_xtml_chat.h's format): the
// generation prompt opens the assistant message and its think section (or, with thinking off,
// its response section); the model writes `REASONING<|close|>think<|sep|><|open|>response<|sep|>
// TEXT<|close|>response<|sep|>`, optionally a tools section of calls with typed arguments, then
// `<|close|>message<|sep|>` and <|end_of_msg|>. Think text is reasoning, response text the
// answer; tags are consumed. Each tool call is handed on inside the answer as the
// <tool_call> block text/tool_call_parser.h reads (typed arguments as <parameter=KEY> items, a
// raw JSON argument block as the JSON form), so the server's call parsing, streaming and ids
// are the ones every model uses. Needs the text with the markers kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/channel_splitter.h"

namespace md {

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
  void start_call(bool json, std::vector<Segment>& out);
  void end_call(std::vector<Segment>& out);

  Section section_;
  std::string pending_;  // text that may hold the start of a marker or an unfinished tag
  std::string call_name_;
  bool call_started_ = false;  // its <tool_call> opening was handed on
  bool call_json_ = false;     // written as the JSON form (a raw argument block)
};

}  // namespace md
