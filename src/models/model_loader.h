// Opens a model directory as a runnable LanguageModel, whatever its family.
#pragma once

#include <memory>
#include <string>

#include "models/language_model.h"

namespace md {

// `directory` holds config.json and the weights. Throws md::Error for configs, checkpoints or
// families megadecode cannot run (drafters are not standalone models).
std::unique_ptr<LanguageModel> load_language_model(const std::string& directory,
                                                   const ModelRunOptions& options);

}  // namespace md
