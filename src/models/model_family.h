// Which model family a config.json describes, decided from model_type / architectures (top level
// or nested text_config) before any family-specific parsing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace md {

enum class ModelFamily {
  kQwen38,     // qwen3_5 (Qwen3_5ForConditionalGeneration) or bare qwen3_5_text
  kKimiK3,     // kimi_k3 (KimiK3ForConditionalGeneration) or bare kimi_linear
  kMuseSpark,  // muse_spark / musespark1x_omni
  kLlama,      // llama (LlamaForCausalLM), e.g. SmolLM2
  kDFlash2,    // DFlash2DraftModel, the Qwen3.8 drafter
  kDSpark,     // speculators "dspark" layout, the Kimi K3 / Muse-Spark drafter
};

// "qwen38", "kimi_k3", "musespark", "llama", "dflash2", "dspark".
std::string_view family_name(ModelFamily family);
bool is_drafter(ModelFamily family);

// Throws md::Error naming the field and value (and listing the supported ones) when the config
// is of no supported family; `file` is used in the message.
ModelFamily detect_model_family(const nlohmann::json& config, const std::string& file);

}  // namespace md
