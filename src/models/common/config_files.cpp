#include "models/common/config_files.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file_util.h"
#include "io/strict_json.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

nlohmann::json read_optional_json(const std::filesystem::path& path, std::string& found_path) {
  if (!file_exists(path.string())) return nullptr;
  found_path = path.string();
  nlohmann::json value = read_json_file(found_path);
  if (!value.is_object()) {
    fail("{}: top level = {}: wrong type: expected object, got {}", found_path,
         config_value_text(value), json_kind_name(value));
  }
  return value;
}

}  // namespace

nlohmann::json read_json_file(const std::string& path) {
  return parse_strict_json(read_text_file(path), path);
}

ConfigFiles read_config_files(const std::string& model_path) {
  std::filesystem::path config_path = model_path;
  if (directory_exists(model_path)) config_path /= "config.json";
  if (!file_exists(config_path.string())) {
    fail("{}: no config.json found (expected a model directory or a config.json path)", model_path);
  }
  ConfigFiles files =
      config_files_from_json(read_json_file(config_path.string()), config_path.string());
  std::filesystem::path dir = config_path.parent_path();
  files.generation = read_optional_json(dir / "generation_config.json", files.generation_path);
  files.quant = read_optional_json(dir / "hf_quant_config.json", files.quant_path);
  return files;
}

ConfigFiles config_files_from_json(nlohmann::json config, std::string name) {
  if (!config.is_object()) {
    fail("{}: top level = {}: wrong type: expected object, got {}", name, config_value_text(config),
         json_kind_name(config));
  }
  ConfigFiles files;
  files.config_path = std::move(name);
  files.config = std::move(config);
  return files;
}

std::vector<int64_t> eos_token_ids(const ConfigFiles& files,
                                   const std::vector<const ConfigReader*>& objects,
                                   int64_t vocab_size, EosPolicy policy) {
  std::vector<int64_t> ids;
  auto collect = [&](const ConfigReader& reader) {
    std::vector<int64_t> found = reader.token_ids("eos_token_id");
    for (std::size_t i = 0; i < found.size(); ++i) {
      if (found[i] < 0 || found[i] >= vocab_size) {
        std::string reason = fmt::format("token id outside the vocabulary [0, {})", vocab_size);
        if (reader.json().at("eos_token_id").is_array()) {
          reader.reject_element("eos_token_id", i, reason);
        }
        reader.reject("eos_token_id", reason);
      }
      if (std::find(ids.begin(), ids.end(), found[i]) == ids.end()) ids.push_back(found[i]);
    }
  };
  if (!files.generation.is_null()) {
    std::string model = objects.empty() ? "megadecode" : objects.front()->model();
    collect(ConfigReader(files.generation_path, files.generation, model));
  }
  if (ids.empty() || policy == EosPolicy::kUnion) {
    for (const ConfigReader* reader : objects) collect(*reader);
  }
  if (ids.empty()) {
    const ConfigReader& reader = *objects.front();
    reader.missing("eos_token_id", "no stop token here or in generation_config.json");
  }
  return ids;
}

}  // namespace md
