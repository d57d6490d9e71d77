// Finds Qwen-style tool calls (<tool_call>…</tool_call>) in the answer text of a chat completion,
// streamed or whole (docs/openai-api.md §12). It runs on content-state text only (reasoning is
// split off first) and knows nothing about HTTP, SSE or how calls are shown.
//
// Rules shared by both entry points:
// - A block's format is chosen by its first non-whitespace text: '{' is the JSON format
//   {"name": ..., "arguments": ...}; "<function=NAME>" is the XML format with
//   <parameter=KEY>\nVALUE\n</parameter> items. Anything else fails.
// - A block that fails to parse is not a call: it stays in content as its raw text, tags
//   included, exactly as if it had never looked like a block, so the whitespace around it is kept.
// - Content is the text outside calls, in order; each segment loses its leading and trailing
//   whitespace where it touches a call.
// - A block still open at the end is parsed as if closed. It succeeds only if its body is already
//   complete (a truncated JSON object or a missing </function> fails).
//
// Streaming and whole parses agree: for any split of a text, the concatenated `content` of every
// push() and finish() equals parse_tool_calls(text).content.value_or(""), and the calls are the
// same, ids included when both use the same deterministic id generator.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace md {

enum class ToolCallFormat { kJson, kXml };

// XML if the chat template source contains "<function=", otherwise JSON (§12.1).
ToolCallFormat tool_call_format_for_template(std::string_view template_source);

// A fresh "call_" + 24 random [A-Za-z0-9] id; the default id generator of the parsers.
std::string random_tool_call_id();

struct ToolCall {
  std::string id;
  std::string name;
  // Compact JSON text of the arguments object, keys in the model's order; for the JSON format a
  // string `arguments` is passed through verbatim.
  std::string arguments;
  bool operator==(const ToolCall&) const = default;
};

class ToolCallParser {
 public:
  // `tools`: the request's `tools` array (may be null); the XML format converts parameter values
  // by their JSON-schema type in the matching tool. `make_id`: returns a fresh call id, injected
  // so tests are deterministic; empty means random_tool_call_id.
  explicit ToolCallParser(nlohmann::ordered_json tools, std::function<std::string()> make_id = {});

  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };

  // Feeds content-state text as it streams; returns what may be released now. Content holds back
  // a suffix that may begin "<tool_call>" and a trailing whitespace run (dropped if a call
  // follows), so a push never returns content ending in either. Inside a block nothing is
  // released until its </tool_call>; then it yields one call, or its raw text as content.
  Output push(std::string_view text);

  // End of generation: releases held text; an open block is parsed as if closed.
  Output finish();

  int calls_so_far() const { return calls_; }

  // True once any </tool_call> has been seen, whether or not its block parsed: with
  // parallel_tool_calls=false the caller ends generation there. Text after that tag in the same
  // piece is still parsed, so a caller that wants it gone must not feed it.
  bool block_closed() const { return block_closed_; }

 private:
  bool scan_content(Output& out);
  bool scan_block(Output& out);
  void end_block(bool closed, Output& out);
  void emit(std::string_view text, Output& out);

  nlohmann::ordered_json tools_;
  std::function<std::string()> make_id_;
  bool in_block_ = false;
  bool after_call_ = false;  // drop whitespace until the next other character
  bool block_closed_ = false;
  int calls_ = 0;
  // Content state: held whitespace and partial marker. Block state: the body so far.
  std::string pending_;
  std::size_t scanned_ = 0;         // body bytes known not to start "</tool_call>"
  std::string space_before_block_;  // held whitespace, released only if the block fails
};

// Whole-text parse for non-streaming responses. `content` is nullopt when at least one call
// exists and nothing but whitespace is left outside calls; with no calls it is the text (possibly
// empty) minus successful blocks.
struct ParsedToolCalls {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

ParsedToolCalls parse_tool_calls(std::string_view text, const nlohmann::ordered_json& tools,
                                 std::function<std::string()> make_id = {});

}  // namespace md
