// Built-in Qwen3.8 shapes with random bf16 weights generated in memory, so that `megadecode bench`
// measures decode speed without any checkpoint on disk.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/qwen38/qwen38_model.h"

namespace md {

// "qwen38-0.8b" (hidden 1024, 24 layers, vocab 248320: the small sibling's geometry) and
// "qwen38-tiny" (the spec's scaled-down test shape; a few MB, cache resident).
std::vector<std::string> synthetic_qwen38_shapes();
Qwen38Config synthetic_qwen38_config(const std::string& shape);  // md::Error for unknown shapes

// Weights drawn from a fixed seed (deterministic), scaled like 1/sqrt(fan_in).
std::unique_ptr<Qwen38Model> make_synthetic_qwen38(const std::string& shape,
                                                   const ModelRunOptions& options);
// The same for any config (tests: layer patterns no checkpoint fixture has).
std::unique_ptr<Qwen38Model> make_synthetic_qwen38(Qwen38Config config,
                                                   const ModelRunOptions& options);

}  // namespace md
