// The weights of a Llama-architecture GGUF file, bound in place in the mapping: matrices stay in
// their GGUF block formats (read by kernels/gguf_matmul.h), the norm vectors are dequantised to
// f32 once. Shared by the reference forward and the step program (llama_step.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/gguf_file.h"
#include "kernels/gguf_matmul.h"
#include "models/llama/llama_config.h"

namespace md {

// A [rows][cols] weight in a GGUF block format, rows `row_bytes` apart in the mapping.
using GgufMatrix = kernels::GgufMatrix;

struct LlamaLayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  GgufMatrix q, k, v, o, gate, up, down;
};

struct LlamaGgufWeights {
  GgufMatrix embedding;
  GgufMatrix output;  // the embedding itself when tied
  std::vector<float> output_norm;
  std::vector<LlamaLayerWeights> layers;
  // Bytes some matrices point into instead of the mapping (HF q/k rows permuted for the
  // adjacent-pair RoPE, llama_hf_weights.h); heap blocks, so moving the struct keeps them valid.
  std::vector<std::unique_ptr<std::uint8_t[]>> owned;
  // A tensor-parallel rank's pack, when its slices were read from one (slice_source.h).
  std::shared_ptr<const void> slice_storage;
};

// Throws md::Error naming the tensor when one is missing, shaped unlike `config` says, or in a
// format the GGUF kernels cannot read.
LlamaGgufWeights bind_llama_gguf_weights(const GgufFile& file, const LlamaConfig& config);

// Tags every matrix with the input mode (kernels/bf16_matrix.h: BF16 ones heed kBf16; Q4_0, Q4_1
// and Q8_0 heed kQ8, and are then packed for it into `owned`).
void set_matmul_inputs(LlamaGgufWeights& weights, kernels::MatmulInputs inputs);

}  // namespace md
