// A `qwen35` GGUF file's tensors bound to the family's weights: matrices in place in their block
// formats, the small vectors as the kernels use them — which is how llama.cpp's converter stores
// them (norm scales with the +1 of the zero-centred weights already added, −exp(A_log) as ssm_a,
// conv taps and norms in F32), so they are read as they are.
#pragma once

#include <memory>

#include "io/gguf_file.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_weights.h"

namespace md {

// Throws md::Error naming the tensor when one is missing, shaped unlike `config` says, or in a
// format the kernels cannot read. The weights keep `file` alive.
Qwen38Weights bind_qwen38_gguf_weights(std::shared_ptr<const GgufFile> file,
                                       const Qwen38Config& config);

}  // namespace md
