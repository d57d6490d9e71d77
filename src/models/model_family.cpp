#include "models/model_family.h"

#include <algorithm>
#include <array>
#include <optional>

#include "base/error.h"
#include "models/common/config_reader.h"

namespace md {

namespace {

struct FamilyName {
  std::string_view name;
  ModelFamily family;
};

// Top-level model_type values, including bare text configs.
constexpr std::array kModelTypes = {
    FamilyName{"qwen3_5", ModelFamily::kQwen38},
    FamilyName{"qwen3_5_text", ModelFamily::kQwen38},
    FamilyName{"qwen3_5_moe", ModelFamily::kQwen38},
    FamilyName{"qwen3_5_moe_text", ModelFamily::kQwen38},
    FamilyName{"kimi_k3", ModelFamily::kKimiK3},
    FamilyName{"kimi_linear", ModelFamily::kKimiK3},
    // mlx-lm registers muse_spark; NeMo's config class calls it musespark1x_omni.
    FamilyName{"muse_spark", ModelFamily::kMuseSpark},
    FamilyName{"musespark1x_omni", ModelFamily::kMuseSpark},
    FamilyName{"llama", ModelFamily::kLlama},
};

// Used when model_type is absent.
constexpr std::array kArchitectures = {
    FamilyName{"Qwen3_5ForConditionalGeneration", ModelFamily::kQwen38},
    FamilyName{"Qwen3_5ForCausalLM", ModelFamily::kQwen38},
    FamilyName{"Qwen3_5MoeForConditionalGeneration", ModelFamily::kQwen38},
    FamilyName{"Qwen3_5MoeForCausalLM", ModelFamily::kQwen38},
    FamilyName{"KimiK3ForConditionalGeneration", ModelFamily::kKimiK3},
    FamilyName{"KimiLinearForCausalLM", ModelFamily::kKimiK3},
    FamilyName{"MuseSparkForConditionalGeneration", ModelFamily::kMuseSpark},
    FamilyName{"MuseSpark1xOmniForCausalLM", ModelFamily::kMuseSpark},
    FamilyName{"LlamaForCausalLM", ModelFamily::kLlama},
};

// Drafters of other layouts: refused by name rather than mistaken for something else.
constexpr std::array<std::string_view, 3> kUnsupportedDrafters = {
    "DFlashDraftModel", "DSparkDraftModel", "K3DSparkModel"};

std::string supported_list() {
  std::string list;
  for (const FamilyName& entry : kModelTypes) {
    list += list.empty() ? "" : ", ";
    list += entry.name;
  }
  return list + "; drafters: architectures DFlash2DraftModel, speculators_model_type dspark";
}

std::optional<ModelFamily> lookup(std::string_view name, auto const& table) {
  for (const FamilyName& entry : table) {
    if (entry.name == name) return entry.family;
  }
  return std::nullopt;
}

std::vector<std::string> architectures_of(const ConfigReader& reader) {
  if (!reader.has("architectures")) return {};
  return reader.string_list("architectures");
}

// Drafters are recognised first: their model_type names the layer type ("qwen3"), not the model.
std::optional<ModelFamily> detect_drafter(const ConfigReader& reader,
                                          const std::vector<std::string>& architectures) {
  if (reader.has("speculators_model_type")) {
    if (reader.string("speculators_model_type") == "dspark") return ModelFamily::kDSpark;
    reader.reject("speculators_model_type", "unsupported speculators drafter (supported: dspark)");
  }
  for (std::size_t i = 0; i < architectures.size(); ++i) {
    if (architectures[i] == "DFlash2DraftModel") return ModelFamily::kDFlash2;
    if (std::find(kUnsupportedDrafters.begin(), kUnsupportedDrafters.end(), architectures[i]) !=
        kUnsupportedDrafters.end()) {
      reader.reject_element("architectures", i,
                            "unsupported drafter layout (supported: DFlash2DraftModel for "
                            "qwen3_5, the speculators dspark layout for kimi_k3 and muse_spark)");
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen38:
      return "qwen38";
    case ModelFamily::kKimiK3:
      return "kimi_k3";
    case ModelFamily::kMuseSpark:
      return "musespark";
    case ModelFamily::kLlama:
      return "llama";
    case ModelFamily::kDFlash2:
      return "dflash2";
    case ModelFamily::kDSpark:
      return "dspark";
  }
  return "unknown";
}

bool is_drafter(ModelFamily family) {
  return family == ModelFamily::kDFlash2 || family == ModelFamily::kDSpark;
}

ModelFamily detect_model_family(const nlohmann::json& config, const std::string& file) {
  ConfigReader reader(file, config, "megadecode");
  std::vector<std::string> architectures = architectures_of(reader);
  if (auto drafter = detect_drafter(reader, architectures)) return *drafter;
  if (reader.has("model_type")) {
    std::string model_type = reader.string("model_type");
    if (auto family = lookup(model_type, kModelTypes)) return *family;
    reader.reject("model_type",
                  fmt::format("unsupported model type (supported: {})", supported_list()));
  }
  for (const std::string& name : architectures) {
    if (auto family = lookup(name, kArchitectures)) return *family;
  }
  if (!architectures.empty()) {
    reader.reject("architectures", fmt::format("no supported architecture and no model_type "
                                               "(supported model types: {})",
                                               supported_list()));
  }
  reader.missing("model_type",
                 fmt::format("cannot tell the model family; supported: {}", supported_list()));
}

}  // namespace md
