#include "text/tokenizer.h"

#include <filesystem>

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
    return load_tiktoken_tokenizer(files);
  }
  fail("no tokenizer in {}: looked for tokenizer.json (Hugging Face) and tiktoken.model (tiktoken)",
       model_dir);
}

}  // namespace md
