#include "text/tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_util.h"
#include "base/mapped_file.h"
#include "base/utf8.h"
#include "text/tokenizer_hf.h"

namespace md {

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (std::int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    append_token_bytes(id, bytes);
  }
  return utf8::is_valid(bytes) ? bytes : utf8::repair(bytes);
}

std::string Tokenizer::token_bytes(std::int32_t id) const {
  std::string out;
  append_token_bytes(id, out);
  return out;
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_from_json(std::string_view json_text,
                                                       const std::string& origin) {
  return std::make_unique<HfBpeTokenizer>(parse_hf_tokenizer_json(json_text, origin));
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& tokenizer_json_path) {
  if (!file_exists(tokenizer_json_path)) fail("tokenizer file not found: {}", tokenizer_json_path);
  const MappedFile file(tokenizer_json_path);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  return load_hf_tokenizer_from_json(text, tokenizer_json_path);
}

namespace {

// vocab_size of a model's config.json (its text_config's for multimodal layouts); 0 when the file,
// the field or a readable value is missing (the model loader reports those; a tokenizer alone,
// as `tokenize` uses it, needs none).
std::int64_t model_vocab_size(const std::string& config_path) {
  if (!file_exists(config_path)) return 0;
  const auto config = nlohmann::json::parse(read_text_file(config_path), nullptr, false);
  if (!config.is_object()) return 0;
  const auto text = config.find("text_config");
  const nlohmann::json& owner = text != config.end() && text->is_object() ? *text : config;
  const auto vocab = owner.find("vocab_size");
  return vocab != owner.end() && vocab->is_number_integer() ? vocab->get<std::int64_t>() : 0;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (!directory_exists(model_dir)) fail("model directory not found: {}", model_dir);
  const std::string hf = (fs::path(model_dir) / "tokenizer.json").string();
  if (file_exists(hf)) return load_hf_tokenizer(hf);
  const std::string tiktoken = (fs::path(model_dir) / "tiktoken.model").string();
  if (file_exists(tiktoken)) {
    TiktokenFiles files;
    files.model_path = tiktoken;
    const std::string config = (fs::path(model_dir) / "tokenizer_config.json").string();
    if (file_exists(config)) files.config_path = config;
    files.vocab_limit = model_vocab_size((fs::path(model_dir) / "config.json").string());
    return load_tiktoken_tokenizer(files);
  }
  fail("no tokenizer in {}: looked for tokenizer.json (Hugging Face) and tiktoken.model (tiktoken)",
       model_dir);
}

}  // namespace md
