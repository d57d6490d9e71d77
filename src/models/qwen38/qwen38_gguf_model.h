// A Qwen3.5 / 3.8 model from a `qwen35` GGUF file (llama.cpp's converter): the same Qwen38Model,
// its config from the GGUF metadata and its weights bound in the file's formats.
#pragma once

#include <memory>

#include "io/gguf_file.h"
#include "models/qwen38/qwen38_model.h"

namespace md {

// Throws md::Error naming the file and the key or tensor on anything the family cannot run.
std::unique_ptr<Qwen38Model> load_qwen38_gguf(std::shared_ptr<const GgufFile> file,
                                              const ModelRunOptions& run_options,
                                              const Qwen38Options& options = {});

}  // namespace md
