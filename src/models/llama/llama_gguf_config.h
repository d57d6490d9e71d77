// A Llama-architecture model's configuration read from GGUF metadata (`general.architecture` =
// "llama", the `llama.*` keys), as llama.cpp's converters write it; e.g. SmolLM2-135M-Instruct.
#pragma once

#include "io/gguf_file.h"
#include "models/llama/llama_config.h"

namespace md {

// Throws md::Error naming the file and key for another architecture, missing or inconsistent
// keys, and settings the engine does not implement (partial rotary, RoPE scaling).
LlamaConfig parse_llama_gguf_config(const GgufFile& file);

}  // namespace md
