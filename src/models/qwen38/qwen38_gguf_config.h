// A `qwen35` GGUF file's metadata (as llama.cpp's converter writes it for transformers'
// qwen3_5 models) as a Qwen38Config: the same model the safetensors directory describes, with
// the GGUF's value-head order.
#pragma once

#include "io/gguf_file.h"
#include "models/qwen38/qwen38_config.h"

namespace md {

// Throws md::Error naming the file and key on an architecture other than qwen35, a missing or
// inconsistent key, or a setting the family cannot run.
Qwen38Config parse_qwen38_gguf_config(const GgufFile& file);

}  // namespace md
