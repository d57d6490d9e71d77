#include "server/choice_assembler.h"

#include <utility>

namespace md::server {

void ChoiceDelta::append(ChoiceDelta&& later) {
  reasoning += later.reasoning;
  content += later.content;
  for (ToolCall& call : later.tool_calls) tool_calls.push_back(std::move(call));
  for (engine::GeneratedToken& token : later.tokens) tokens.push_back(std::move(token));
  if (later.finished) {
    finished = true;
    finish_reason = std::move(later.finish_reason);
    stop_reason = std::move(later.stop_reason);
  }
}

ChoiceAssembler::ChoiceAssembler(ChoiceConfig config) : config_(std::move(config)) {
  if (config_.split_reasoning) {
    reasoning_ = make_channel_splitter(config_.channel_format, config_.prompt_end);
  }
  if (config_.parse_tools) {
    tools_.emplace(config_.tools);
    // The forced prefix is already in the prompt; the parser sees it as the output's start.
    if (!config_.forced_prefix.empty()) (void)tools_->push(config_.forced_prefix);
  }
}

// Reasoning loses its leading and trailing newlines: a trailing run is held until other
// reasoning text follows, and dropped when the answer starts or the choice ends.
void ChoiceAssembler::add_reasoning(const std::string& text, ChoiceDelta& delta) {
  std::size_t body_end = text.find_last_not_of('\n');
  if (body_end == std::string::npos) {
    if (reasoning_started_) reasoning_newlines_ += text;
    return;
  }
  std::string body = text.substr(0, body_end + 1);
  if (!reasoning_started_) body.erase(0, body.find_first_not_of('\n'));
  delta.reasoning += reasoning_newlines_ + body;
  reasoning_newlines_ = text.substr(body_end + 1);
  reasoning_started_ = true;
}

void ChoiceAssembler::route_answer(const std::string& text, ChoiceDelta& delta) {
  if (!tools_) {
    delta.content += text;
    return;
  }
  ToolCallParser::Output out = tools_->push(text);
  delta.content += out.content;
  tool_calls_ += static_cast<int>(out.calls.size());
  for (ToolCall& call : out.calls) delta.tool_calls.push_back(std::move(call));
}

void ChoiceAssembler::route_text(const std::string& text, ChoiceDelta& delta) {
  if (!reasoning_) {
    if (!text.empty()) route_answer(text, delta);
    return;
  }
  for (ChannelSplitter::Segment& segment : reasoning_->push(text)) {
    if (segment.kind == ChannelSplitter::Segment::kReasoning) {
      add_reasoning(segment.text, delta);
    } else {
      reasoning_newlines_.clear();
      route_answer(segment.text, delta);
    }
  }
}

void ChoiceAssembler::flush(ChoiceDelta& delta) {
  if (reasoning_) {
    for (ChannelSplitter::Segment& segment : reasoning_->finish()) {
      if (segment.kind == ChannelSplitter::Segment::kReasoning) {
        add_reasoning(segment.text, delta);
      } else {
        route_answer(segment.text, delta);
      }
    }
  }
  if (tools_) {
    ToolCallParser::Output out = tools_->finish();
    delta.content += out.content;
    tool_calls_ += static_cast<int>(out.calls.size());
    for (ToolCall& call : out.calls) delta.tool_calls.push_back(std::move(call));
  }
}

void ChoiceAssembler::finish(ChoiceDelta& delta, std::string reason,
                             nlohmann::ordered_json stop_reason) {
  flush(delta);
  finished_ = true;
  delta.finished = true;
  // A choice that ran into its limit is `length` even with calls; otherwise calls make it
  // `tool_calls` (§12.3) and the stop reason is not reported.
  if (reason == "stop" && tool_calls_ > 0) {
    reason = "tool_calls";
    stop_reason = nullptr;
  }
  delta.finish_reason = std::move(reason);
  delta.stop_reason = std::move(stop_reason);
}

ChoiceDelta ChoiceAssembler::add(const engine::TokenOutcome& outcome) {
  ChoiceDelta delta;
  if (finished_) return delta;
  ++completion_tokens_;
  if (outcome.reported) delta.tokens.push_back(outcome.token);
  // Every token is one piece for the splitter (an empty one too): it counts reasoning tokens.
  route_text(outcome.text, delta);
  if (reasoning_) reasoning_tokens_ = reasoning_->reasoning_pieces();
  if (outcome.finished) {
    engine_finished_ = true;
    nlohmann::ordered_json stop_reason = nullptr;
    if (outcome.stop_string) stop_reason = *outcome.stop_string;
    if (outcome.stop_token) stop_reason = *outcome.stop_token;
    finish(delta, outcome.finish == engine::FinishReason::kLength ? "length" : "stop",
           std::move(stop_reason));
  } else if (tools_ && !config_.parallel_tool_calls && tools_->block_closed()) {
    finish(delta, "stop", nullptr);
  }
  return delta;
}

}  // namespace md::server
