// A validated config of any supported family, loaded from a model directory; the entry point for
// the CLI and the engine before any weight is touched.
#pragma once

#include <string>
#include <variant>

#include "models/common/config_files.h"
#include "models/drafters/dflash2_config.h"
#include "models/drafters/dspark_config.h"
#include "models/kimi/kimi_config.h"
#include "models/llama/llama_config.h"
#include "models/model_family.h"
#include "models/musespark/musespark_config.h"
#include "models/qwen38/qwen38_config.h"

namespace md {

// Alternatives are in ModelFamily order.
using ModelConfig = std::variant<Qwen38Config, KimiK3Config, MuseSparkConfig, LlamaConfig,
                                 DFlash2Config, DSparkConfig>;

ModelFamily family_of(const ModelConfig& config);

// Detects the family and parses its config; throws md::Error naming file, field and value.
ModelConfig parse_model_config(const ConfigFiles& files);
// `model_path` is a model directory (config.json, optional generation_config.json and
// hf_quant_config.json) or the path of a config.json.
ModelConfig load_model_config(const std::string& model_path);

// Refuses a drafter that does not fit the target: DFlash2 drafts for qwen3_5, DSpark for kimi_k3
// and muse_spark, with matching hidden size, vocabulary and tap layers.
void check_draft_for_target(const ModelConfig& target, const ModelConfig& draft);

ConfigFootprint model_footprint(const ModelConfig& config, const FootprintOptions& options);

}  // namespace md
