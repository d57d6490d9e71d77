// A multi-turn conversation with one model, independent of the terminal: the message history,
// each turn's prompt (built so that the sequence the model already processed is reused), and
// each reply split into reasoning and answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/model_session.h"
#include "engine/generation.h"
#include "text/reasoning_parser.h"

namespace md::cli {

struct ChatOptions {
  std::string system;    // "" for none
  bool thinking = true;  // false: the template's enable_thinking=false
};

struct ChatTurn {
  std::string reasoning;
  std::string answer;
  engine::FinishReason finish = engine::FinishReason::kStop;
  engine::GenerationStats stats;
};

class ChatSession {
 public:
  using SegmentCallback = std::function<void(const ReasoningParser::Segment&)>;

  // `model` must outlive the session. Throws md::Error when the model has no chat template.
  ChatSession(ModelSession& model, SamplingFlags sampling, ChatOptions options);

  // Adds the user's message, generates the reply (streamed to `on_segment`) and adds it to the
  // history, also when cancelled part way. On md::Error (e.g. the conversation no longer fits
  // the context) the history is left as it was before the call.
  ChatTurn send(const std::string& user_text, const SegmentCallback& on_segment,
                const std::atomic<bool>* cancel = nullptr);

  // Forgets the conversation (the system message stays) and the sequence the model holds.
  void reset();
  // Sets ("" clears) the system message and starts a new conversation.
  void set_system(std::string text);

  const std::optional<ChatTurn>& last_turn() const { return last_turn_; }
  const nlohmann::ordered_json& messages() const { return messages_; }
  int64_t context_used() const;
  int64_t context_capacity() const { return generator_.context(); }
  // Told how each turn's prompt prefill advances (engine::Generator::set_prefill_progress).
  void set_prefill_progress(engine::Generator::PrefillProgress progress) {
    generator_.set_prefill_progress(std::move(progress));
  }

 private:
  std::vector<int32_t> encode_prompt(const std::string& rendered,
                                     const std::vector<ChatSegment>& segments) const;
  void remember(const std::string& rendered, std::vector<int32_t> prompt,
                const engine::GenerationResult& result);

  ModelSession& model_;
  SamplingFlags sampling_;
  ChatOptions options_;
  engine::Generator generator_;
  nlohmann::ordered_json messages_;
  // What the model has seen so far, as text and as the tokens it actually processed.
  std::string seen_text_;
  std::vector<int32_t> seen_tokens_;
  std::optional<ChatTurn> last_turn_;
};

}  // namespace md::cli
