#include "text/chat_template.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/file_util.h"
#include "text/tokenizer.h"

namespace md {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json read_json(const std::string& path) {
  try {
    return ordered_json::parse(read_text_file(path));
  } catch (const ordered_json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

// tokenizer_config.json writes special tokens as a string or as an AddedToken object.
std::optional<std::string> special_token(const ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail("tokenizer_config.json: '{}' must be a string or an object with 'content'", key);
}

std::optional<std::string> template_from_config(const ordered_json& config,
                                                const std::string& path) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) fail("{}: chat_template must be a string or a list", path);
  std::string names;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) {
      fail("{}: chat_template list entries need 'name' and 'template'", path);
    }
    std::string name = entry["name"].get<std::string>();
    if (name == "default") return entry["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + name;
  }
  fail("{}: no chat template named 'default' (available: {})", path, names);
}

// `name` occurs in `source` with no identifier character on either side.
bool mentions_identifier(std::string_view source, std::string_view name) {
  auto identifier_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  for (std::size_t at = source.find(name); at != std::string_view::npos;
       at = source.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    if ((at == 0 || !identifier_char(source[at - 1])) &&
        (end == source.size() || !identifier_char(source[end]))) {
      return true;
    }
  }
  return false;
}

// Whether added_tokens_decoder names Kimi K3's structure markers (its checkpoint ships no
// template: the format is rendered by code).
bool names_kimi_markers(const ordered_json& config) {
  const auto decoder = config.find("added_tokens_decoder");
  if (decoder == config.end() || !decoder->is_object()) return false;
  std::set<std::string> found;
  for (const auto& [id, entry] : decoder->items()) {
    if (!entry.is_object()) continue;
    const auto content = entry.find("content");
    if (content == entry.end() || !content->is_string()) continue;
    const std::string& name = content->get_ref<const std::string&>();
    if (name == "<|open|>" || name == "<|sep|>" || name == "<|close|>" ||
        name == "<|end_of_msg|>") {
      found.insert(name);
    }
  }
  return found.size() == 4;
}

}  // namespace

std::vector<std::int32_t> encode_chat_segments(const Tokenizer& tokenizer,
                                               const std::vector<ChatSegment>& segments) {
  std::vector<std::int32_t> ids;
  for (const ChatSegment& segment : segments) {
    const std::vector<std::int32_t> part = tokenizer.encode(segment.text, segment.markers);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::vector<ChatSegment> segments_before(const std::vector<ChatSegment>& segments,
                                         std::size_t bytes) {
  std::vector<ChatSegment> out;
  for (const ChatSegment& segment : segments) {
    if (bytes == 0) break;
    const std::size_t take = std::min(bytes, segment.text.size());
    out.push_back({segment.text.substr(0, take), segment.markers});
    bytes -= take;
  }
  return out;
}

std::vector<ChatSegment> segments_after(const std::vector<ChatSegment>& segments,
                                        std::size_t bytes) {
  std::vector<ChatSegment> out;
  for (const ChatSegment& segment : segments) {
    const std::size_t skip = std::min(bytes, segment.text.size());
    bytes -= skip;
    if (skip < segment.text.size()) out.push_back({segment.text.substr(skip), segment.markers});
  }
  return out;
}

ChatTemplate::ChatTemplate(std::string_view source, std::string name)
    : source_(source),
      takes_tools_(mentions_identifier(source, "tools")),
      template_(std::make_shared<const jinja::Template>(source, std::move(name))) {}

ChatTemplate ChatTemplate::kimi_xtml() {
  ChatTemplate result;
  result.source_ =
      "{# megadecode's built-in Kimi K3 chat format (XTML, text/kimi_xtml_chat.h): "
      "<|open|>message role=\"…\"<|sep|> … <|close|>message<|sep|><|end_of_msg|>, assistant "
      "sections <|open|>think<|sep|>, <|open|>response<|sep|>, <|open|>tools<|sep|>; reads "
      "messages, tools, thinking, thinking_effort, tool_choice, response_format #}";
  result.takes_tools_ = true;
  return result;
}

std::vector<ChatSegment> ChatTemplate::render_segments(const ordered_json& messages,
                                                       const ChatTemplateOptions& options) const {
  if (template_ != nullptr) return {{render(messages, options), true}};
  if (!messages.is_array()) fail("chat template: messages must be a JSON array");
  if (!options.extra.is_object()) fail("chat template: extra variables must be a JSON object");
  KimiXtmlOptions xtml;
  xtml.add_generation_prompt = options.add_generation_prompt;
  xtml.tools = options.tools;
  xtml.variables = options.extra;
  return render_kimi_xtml(messages, xtml);
}

std::string ChatTemplate::render(const ordered_json& messages,
                                 const ChatTemplateOptions& options) const {
  if (template_ == nullptr) return join_segments(render_segments(messages, options));
  if (!messages.is_array()) fail("chat template: messages must be a JSON array");
  if (!options.tools.is_null() && !options.tools.is_array()) {
    fail("chat template: tools must be a JSON array or null");
  }
  if (!options.extra.is_object()) fail("chat template: extra variables must be a JSON object");
  // The variables transformers passes: messages, tools, documents, add_generation_prompt, the
  // set special tokens, then the caller's keyword arguments.
  ordered_json vars = ordered_json::object();
  vars["messages"] = messages;
  vars["tools"] = options.tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = options.add_generation_prompt;
  const auto& bos = options.bos_token ? options.bos_token : bos_token_;
  const auto& eos = options.eos_token ? options.eos_token : eos_token_;
  if (bos && !bos->empty()) vars["bos_token"] = *bos;
  if (eos && !eos->empty()) vars["eos_token"] = *eos;
  for (const auto& [key, value] : options.extra.items()) {
    if (key == "messages" || key == "tools" || key == "documents" ||
        key == "add_generation_prompt") {
      fail("chat template: '{}' cannot be passed as an extra variable", key);
    }
    vars[key] = value;
  }
  return template_->render(vars, options.limits);
}

std::optional<ChatTemplate> ChatTemplate::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::string config_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  std::string jinja_path = (fs::path(model_dir) / "chat_template.jinja").string();
  std::string processor_path = (fs::path(model_dir) / "chat_template.json").string();
  ordered_json config = file_exists(config_path) ? read_json(config_path) : ordered_json::object();
  std::optional<std::string> source;
  std::string origin;
  if (file_exists(jinja_path)) {
    source = read_text_file(jinja_path);
    origin = jinja_path;
  } else if ((source = template_from_config(config, config_path))) {
    origin = config_path;
  } else if (file_exists(processor_path)) {
    source = template_from_config(read_json(processor_path), processor_path);
    origin = processor_path;
  }
  if (!source) {
    if (!names_kimi_markers(config)) return std::nullopt;
    ChatTemplate result = kimi_xtml();
    result.set_special_tokens(special_token(config, "bos_token"),
                              special_token(config, "eos_token"));
    return result;
  }
  // Named by file, not path: the name appears in rendering errors, which reach API clients.
  ChatTemplate result(*source, fs::path(origin).filename().string());
  result.set_special_tokens(special_token(config, "bos_token"), special_token(config, "eos_token"));
  return result;
}

}  // namespace md
