#include "cli/chat_session.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "text/channel_splitter.h"

namespace md::cli {
namespace {

nlohmann::ordered_json message(std::string_view role, std::string_view content) {
  return {{"role", role}, {"content", content}};
}

std::string trim(std::string_view text) {
  std::size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// Why a turn could not reuse the sequence (-v): where the template's text left what the model saw.
void log_divergence(std::string_view seen, std::string_view rendered) {
  auto at = std::mismatch(seen.begin(), seen.end(), rendered.begin(), rendered.end()).first;
  auto offset = static_cast<std::size_t>(at - seen.begin());
  std::size_t from = offset < 20 ? 0 : offset - 20;
  log::debug(
      "chat: the conversation no longer extends what the model saw (at byte {}: seen {:?}, "
      "now {:?}); the prompt is processed again",
      offset, seen.substr(from, 40), rendered.substr(from, 40));
}

}  // namespace

ChatSession::ChatSession(ModelSession& model, SamplingFlags sampling, ChatOptions options)
    : model_(model),
      sampling_(std::move(sampling)),
      options_(std::move(options)),
      generator_(*model.model, *model.tokenizer, model.context) {
  model.attach(generator_);
  if (!model_.chat_template) {
    fail(
        "{} has no chat template (tokenizer_config.json chat_template or chat_template.jinja); "
        "chat needs one. `megadecode run --raw` generates from plain text",
        model_.source.directory);
  }
  reset();
}

void ChatSession::reset() {
  messages_ = nlohmann::ordered_json::array();
  if (!options_.system.empty()) messages_.push_back(message("system", options_.system));
  generator_.reset();
  seen_text_.clear();
  seen_tokens_.clear();
}

void ChatSession::set_system(std::string text) {
  options_.system = std::move(text);
  reset();
}

int64_t ChatSession::context_used() const {
  return static_cast<int64_t>(generator_.cached_tokens().size());
}

ChatTurn ChatSession::send(const std::string& user_text, const SegmentCallback& on_segment,
                           const std::atomic<bool>* cancel) {
  ChatTemplateOptions template_options;
  template_options.add_generation_prompt = true;
  if (!options_.thinking) template_options.extra["enable_thinking"] = false;
  nlohmann::ordered_json messages = messages_;
  messages.push_back(message("user", user_text));
  const std::vector<ChatSegment> prompt_segments =
      model_.chat_template->render_segments(messages, template_options);
  std::string rendered = join_segments(prompt_segments);
  std::vector<int32_t> prompt = encode_prompt(rendered, prompt_segments);

  ChatTurn turn;
  // Templates without markers still go through think tags: a model may think unprompted.
  ChannelFormat format = channel_format_of_template(model_.chat_template->source());
  if (format == ChannelFormat::kNone) format = ChannelFormat::kThinkTags;
  std::unique_ptr<ChannelSplitter> parser = make_channel_splitter(format, rendered);
  auto deliver = [&](const std::vector<ReasoningParser::Segment>& segments) {
    for (const ReasoningParser::Segment& segment : segments) {
      bool reasoning = segment.kind == ReasoningParser::Segment::kReasoning;
      (reasoning ? turn.reasoning : turn.answer) += segment.text;
      if (on_segment) on_segment(segment);
    }
  };
  engine::GenerationRequest request = make_request(model_, sampling_, prompt);
  // Muse's headers are special tokens: the splitter must see them as text.
  request.kept_special = channel_marker_ids(format, *model_.tokenizer);
  engine::GenerationResult result = generator_.generate(
      request, [&](std::string_view piece) { deliver(parser->push(piece)); }, cancel);
  deliver(parser->finish());
  turn.finish = result.finish;
  turn.stats = result.stats;

  remember(rendered, std::move(prompt), result);
  messages.push_back({{"role", "assistant"},
                      {"content", turn.answer},
                      {"reasoning_content", trim(turn.reasoning)}});
  messages_ = std::move(messages);
  last_turn_ = turn;
  return turn;
}

// The next prompt is the whole conversation rendered again. When that text starts with
// everything the model has already seen, the prompt reuses the very tokens the model processed
// and only the new text is encoded: a fresh encoding of the whole text could cut the boundary
// between the model's own tokens differently, and the sequence (KV cache and recurrent state)
// could then not be reused. Otherwise (the template rewrote earlier turns) everything is
// encoded afresh and the generator starts the sequence over.
// The text is encoded by its segments (chat_template.h): a marker the user types stays text
// where the format says so (Kimi K3).
std::vector<int32_t> ChatSession::encode_prompt(const std::string& rendered,
                                                const std::vector<ChatSegment>& segments) const {
  const Tokenizer& tokenizer = *model_.tokenizer;
  bool extends = !seen_text_.empty() && rendered.size() > seen_text_.size() &&
                 rendered.starts_with(seen_text_);
  if (!extends) {
    if (!seen_text_.empty()) log_divergence(seen_text_, rendered);
    return encode_chat_segments(tokenizer, segments);
  }
  std::vector<int32_t> prompt = seen_tokens_;
  std::vector<int32_t> rest =
      encode_chat_segments(tokenizer, segments_after(segments, seen_text_.size()));
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  return prompt;
}

void ChatSession::remember(const std::string& rendered, std::vector<int32_t> prompt,
                           const engine::GenerationResult& result) {
  std::vector<int32_t> generated;
  generated.reserve(result.tokens.size());
  for (const engine::GeneratedToken& token : result.tokens) generated.push_back(token.id);
  // Special tokens the model produced are part of what it saw, even though the reply text
  // leaves them out; with them the seen text can only match a template that writes them too.
  seen_text_ = rendered + model_.tokenizer->decode(generated, false);
  seen_tokens_ = std::move(prompt);
  seen_tokens_.insert(seen_tokens_.end(), generated.begin(), generated.end());
}

}  // namespace md::cli
