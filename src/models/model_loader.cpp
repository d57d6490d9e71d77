#include "models/model_loader.h"

#include "base/error.h"
#include "models/kimi/kimi_model.h"
#include "models/llama/llama_gguf_model.h"
#include "models/model_config.h"
#include "models/musespark/musespark_model.h"
#include "models/qwen38/qwen38_gguf_model.h"
#include "models/qwen38/qwen38_model.h"

namespace md {

std::unique_ptr<LanguageModel> load_language_model(const std::string& directory,
                                                   const ModelRunOptions& options) {
  // A single .gguf file carries its own configuration (llama.cpp's format).
  if (directory.size() > 5 && directory.ends_with(".gguf")) {
    auto file = std::make_shared<const GgufFile>(directory);
    const std::string architecture = file->string_or("general.architecture", "");
    require_stored_dense_weights(options, directory);
    if (architecture == "qwen35" || architecture == "qwen35moe") {
      return load_qwen38_gguf(std::move(file), options);
    }
    return std::make_unique<LlamaGgufModel>(std::move(file), options);
  }
  ModelFamily family = family_of(load_model_config(directory));
  if (family != ModelFamily::kMuseSpark) require_stored_dense_weights(options, directory);
  switch (family) {
    case ModelFamily::kQwen38:
      return std::make_unique<Qwen38Model>(directory, options);
    case ModelFamily::kLlama:
      // The same model class and step program as GGUF files; the HF tensors are bound in place
      // (q/k rows permuted for the adjacent-pair RoPE, see llama/llama_hf_weights.h).
      return std::make_unique<LlamaGgufModel>(directory, options);
    case ModelFamily::kMuseSpark:
      return std::make_unique<MuseSparkModel>(directory, options);
    case ModelFamily::kKimiK3:
      return std::make_unique<KimiModel>(directory, options);
    case ModelFamily::kDFlash2:
    case ModelFamily::kDSpark:
      fail("{} is a {} drafter, not a model that can run on its own; pass its target model",
           directory, family_name(family));
  }
  fail("{}: unknown model family", directory);
}

}  // namespace md
