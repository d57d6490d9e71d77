// Turns one choice's stream of sampled tokens into what the OpenAI API shows: reasoning split off
// (`<think>` … `</think>`), tool calls parsed out of the answer, content, the tokens to report
// log-probabilities for, usage counts and the finish reason. Streaming and non-streaming
// responses both go through it (non-streaming concatenates the deltas), so the two always agree.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/choice_decoder.h"
#include "text/channel_splitter.h"
#include "text/tool_call_parser.h"

namespace md::server {

struct ChoiceConfig {
  bool split_reasoning = false;                         // chat with the reasoning parser on
  ChannelFormat channel_format = ChannelFormat::kNone;  // how the output marks reasoning
  // The rendered prompt's last bytes: whether the output starts inside reasoning or a header.
  std::string prompt_end;
  bool parse_tools = false;  // chat with tools and tool_choice != none
  nlohmann::ordered_json tools = nullptr;
  bool parallel_tool_calls = true;
  std::string forced_prefix;  // forced tool-call prefix: the start of the output
  int32_t prompt = 0;         // which of the request's prompts (completions take several)
};

struct ChoiceDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  std::vector<engine::GeneratedToken> tokens;  // reported tokens released with this delta
  bool finished = false;
  std::string finish_reason;                     // set when finished
  nlohmann::ordered_json stop_reason = nullptr;  // matched stop string or stop token id

  bool has_output() const { return !reasoning.empty() || !content.empty() || !tool_calls.empty(); }
  void append(ChoiceDelta&& later);
};

class ChoiceAssembler {
 public:
  explicit ChoiceAssembler(ChoiceConfig config);

  // One sampled token. Tokens after the choice finished (the engine may still deliver some after
  // a parser-ended choice) are ignored and not counted.
  ChoiceDelta add(const engine::TokenOutcome& outcome);

  bool finished() const { return finished_; }
  // The parser ended the choice (parallel_tool_calls=false after the first call): the engine
  // should stop generating it.
  bool wants_stop() const { return finished_ && !engine_finished_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  int tool_calls() const { return tool_calls_; }

 private:
  void route_text(const std::string& text, ChoiceDelta& delta);
  void route_answer(const std::string& text, ChoiceDelta& delta);
  void add_reasoning(const std::string& text, ChoiceDelta& delta);
  void flush(ChoiceDelta& delta);
  void finish(ChoiceDelta& delta, std::string reason, nlohmann::ordered_json stop_reason);

  ChoiceConfig config_;
  std::unique_ptr<ChannelSplitter> reasoning_;
  std::optional<ToolCallParser> tools_;
  std::string reasoning_newlines_;  // a trailing run of '\n' in reasoning, held (§11)
  bool reasoning_started_ = false;
  bool finished_ = false;
  bool engine_finished_ = false;
  int64_t completion_tokens_ = 0;
  int64_t reasoning_tokens_ = 0;
  int tool_calls_ = 0;
};

}  // namespace md::server
