#include "models/qwen38/qwen38_gguf_model.h"

#include "models/qwen38/qwen38_gguf_config.h"
#include "models/qwen38/qwen38_gguf_weights.h"

namespace md {

std::unique_ptr<Qwen38Model> load_qwen38_gguf(std::shared_ptr<const GgufFile> file,
                                              const ModelRunOptions& run_options,
                                              const Qwen38Options& options) {
  Qwen38Config config = parse_qwen38_gguf_config(*file);
  std::string path = file->path();
  Qwen38Weights weights = bind_qwen38_gguf_weights(std::move(file), config);
  return std::make_unique<Qwen38Model>(std::move(path), std::move(config), std::move(weights),
                                       run_options, options);
}

}  // namespace md
