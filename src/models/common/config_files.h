// The JSON files that describe a model directory (config.json, generation_config.json,
// hf_quant_config.json), parsed once so that every family reads them the same way.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/common/config_reader.h"

namespace md {

struct ConfigFiles {
  std::string config_path;      // as used in error messages
  nlohmann::json config;        // always an object
  std::string generation_path;  // empty when the model has no generation_config.json
  nlohmann::json generation;    // null when absent
  std::string quant_path;       // hf_quant_config.json (ModelOpt); empty when absent
  nlohmann::json quant;         // null when absent
};

// `model_path` is a model directory or the path of its config.json; the optional files are
// looked up beside config.json.
ConfigFiles read_config_files(const std::string& model_path);
// In-memory config (tests, synthesized models); `name` is the file name used in errors.
ConfigFiles config_files_from_json(nlohmann::json config, std::string name = "config.json");

// Reads a JSON file strictly (duplicate keys refused); errors name the file and the line and
// column of the problem.
nlohmann::json read_json_file(const std::string& path);

enum class EosPolicy {
  kUnion,            // every eos_token_id of generation_config.json and the given objects
  kGenerationFirst,  // generation_config.json when it has one, else the given objects
};
// The stop token ids of a model, each checked to be < vocab_size, in first-seen order
// (generation_config.json first). Refuses a model with none.
std::vector<int64_t> eos_token_ids(const ConfigFiles& files,
                                   const std::vector<const ConfigReader*>& objects,
                                   int64_t vocab_size, EosPolicy policy);

}  // namespace md
