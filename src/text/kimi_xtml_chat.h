// Kimi K3's chat format ("XTML"), which the published checkpoint renders in Python
// (encoding_k3.py) rather than with a Jinja template: every message is
// `<|open|>message role="…"<|sep|>BODY<|close|>message<|sep|><|end_of_msg|>`, an assistant body
// holds think, response and tools sections, tool calls carry typed arguments, and internal system
// messages declare tools, the thinking effort, a forced tool choice and a response format. Written
// from the format's published description (docs/DECISIONS.md, Kimi K3 chat); checked byte for byte
// against jinja2 rendering llama.cpp's transcription of it (tools/gen_kimi_xtml_goldens.py).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace md {

// A piece of a rendered prompt: the structure markers (<|open|>, <|sep|>, <|close|>,
// <|end_of_msg|>) are encoded as their special ids, everything else (tag names, attributes and
// all content) as ordinary text, so that a marker typed in a message never becomes structure.
struct ChatSegment {
  std::string text;
  bool markers = false;
  bool operator==(const ChatSegment&) const = default;
};

struct KimiXtmlOptions {
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools = nullptr;  // the request's tools array, or null
  // The chat switches: thinking (default on; enable_thinking is an alias, reasoning_effort
  // "none" turns it off), thinking_effort (default "max"; reasoning_effort is an alias), and
  // tool_choice / response_format / response_schema as the request gives them.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

// Renders `messages` (OpenAI-style, as the server normalises them). Throws jinja::TemplateError
// of kind kRaised, with the reason, for conversations the format refuses (a message without a
// role, a tool call without a name, a tool result whose tool cannot be resolved, an unsupported
// thinking effort).
std::vector<ChatSegment> render_kimi_xtml(const nlohmann::ordered_json& messages,
                                          const KimiXtmlOptions& options);

std::string join_segments(const std::vector<ChatSegment>& segments);

}  // namespace md
