#include "engine/generation_defaults.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_util.h"

namespace md::engine {

namespace {

template <typename T>
std::optional<T> number(const nlohmann::json& config, const char* key, const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail("{}: '{}' must be a number, got {}", path, key, it->dump());
  return it->get<T>();
}

}  // namespace

GenerationDefaults read_generation_defaults(const std::string& directory) {
  GenerationDefaults defaults;
  std::string path = (std::filesystem::path(directory) / "generation_config.json").string();
  if (!file_exists(path)) return defaults;
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON ({})", path, error.what());
  }
  if (!config.is_object()) fail("{}: expected a JSON object", path);
  defaults.temperature = number<float>(config, "temperature", path);
  defaults.top_k = number<int32_t>(config, "top_k", path);
  defaults.top_p = number<float>(config, "top_p", path);
  defaults.min_p = number<float>(config, "min_p", path);
  defaults.repetition_penalty = number<float>(config, "repetition_penalty", path);
  auto sample = config.find("do_sample");
  defaults.greedy = sample != config.end() && sample->is_boolean() && !sample->get<bool>();
  return defaults;
}

SamplingParams default_sampling(const GenerationDefaults& defaults) {
  SamplingParams params;
  if (defaults.greedy) {
    params.temperature = 0;
    return params;
  }
  if (defaults.temperature) params.temperature = *defaults.temperature;
  if (defaults.top_k) params.top_k = *defaults.top_k;
  if (defaults.top_p) params.top_p = *defaults.top_p;
  if (defaults.min_p) params.min_p = *defaults.min_p;
  if (defaults.repetition_penalty) params.repetition_penalty = *defaults.repetition_penalty;
  return params;
}

}  // namespace md::engine
