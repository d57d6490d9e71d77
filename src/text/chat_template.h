// Turns a chat conversation (OpenAI-style messages) into the model's prompt text with the model's
// own Hugging Face chat template, exactly as transformers' apply_chat_template renders it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/interpreter.h"
#include "text/jinja/template.h"
#include "text/kimi_xtml_chat.h"

namespace md {

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  // Tool schemas (a JSON array) or null. Passed to the template as `tools`.
  nlohmann::ordered_json tools = nullptr;
  // Override the special tokens the template was loaded with (tokenizer_config.json). As in
  // transformers, an empty token is not passed to the template at all (it stays undefined).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Further template variables: enable_thinking, reasoning_effort, preserve_thinking, ...
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Parses the template once; throws jinja::TemplateError (an md::Error) with line and column.
  explicit ChatTemplate(std::string_view source, std::string name = "chat_template");
  // Kimi K3's chat format, which its checkpoint renders in Python rather than with a template
  // (kimi_xtml_chat.h). Its source() is a description that names the format's markers.
  static ChatTemplate kimi_xtml();

  // Renders `messages` (a JSON array of message objects). Thread-safe. Object key order is kept
  // (tools | tojson prints keys in request order), so pass nlohmann::ordered_json when order
  // matters; nlohmann::json converts implicitly (its keys are sorted). Throws
  // jinja::TemplateError; kind() == kRaised for the template's own raise_exception(message).
  std::string render(const nlohmann::ordered_json& messages,
                     const ChatTemplateOptions& options = {}) const;
  // The same text in segments that say which parts are structure markers to encode as special
  // tokens (Kimi K3's format); a Jinja template's output is one segment whose special tokens are
  // all parsed (transformers' behaviour).
  std::vector<ChatSegment> render_segments(const nlohmann::ordered_json& messages,
                                           const ChatTemplateOptions& options = {}) const;

  // Finds the model's template in `model_dir`: chat_template.jinja, else `chat_template` in
  // tokenizer_config.json (a string, or a list of {name, template} from which "default" is
  // taken), else chat_template.json, else Kimi K3's built-in format when tokenizer_config.json
  // names its markers (<|open|>, <|sep|>, <|close|>, <|end_of_msg|>). bos/eos tokens come from
  // tokenizer_config.json. Returns nullopt when the model has no chat template; throws md::Error
  // for unreadable files.
  static std::optional<ChatTemplate> load(const std::string& model_dir);

  const std::string& source() const { return source_; }
  bool is_kimi_xtml() const { return template_ == nullptr; }
  // Whether the template reads the `tools` variable at all (the name appears as an identifier):
  // a template that does not would silently drop a request's tools.
  bool takes_tools() const { return takes_tools_; }
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }
  void set_special_tokens(std::optional<std::string> bos, std::optional<std::string> eos) {
    bos_token_ = std::move(bos);
    eos_token_ = std::move(eos);
  }

 private:
  ChatTemplate() = default;  // kimi_xtml()
  std::string source_;
  bool takes_tools_ = false;
  std::shared_ptr<const jinja::Template> template_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

class Tokenizer;

// Token ids of a rendered prompt: marker segments with special tokens parsed, the others without.
std::vector<std::int32_t> encode_chat_segments(const Tokenizer& tokenizer,
                                               const std::vector<ChatSegment>& segments);
// The segments of the first `bytes` of their text, and of the text after its first `bytes`
// (a segment cut in two keeps its kind on both sides).
std::vector<ChatSegment> segments_before(const std::vector<ChatSegment>& segments,
                                         std::size_t bytes);
std::vector<ChatSegment> segments_after(const std::vector<ChatSegment>& segments,
                                        std::size_t bytes);

}  // namespace md
