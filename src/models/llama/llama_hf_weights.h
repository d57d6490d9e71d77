// The weights of a Hugging Face LlamaForCausalLM checkpoint (safetensors, single file or sharded)
// bound as the same LlamaGgufWeights the GGUF loader produces, so that the reference forward and
// the step program run unchanged. Matrices in BF16, F16 or F32 are read in place from the mapping
// (the GGUF GEMV kernels read those formats too), with one exception, q_proj and k_proj:
//
// HF applies RoPE in the rotate-half convention (dimension i pairs with i + head_dim/2), while the
// kernels (kernels::Rope with RopePairing::kAdjacent) pair adjacent dimensions (2i, 2i+1), as
// llama.cpp does because its converter permutes the q/k rows when writing GGUF. We copy q_proj and
// k_proj into owned memory permuted the same way: per head, output row 2i <- row i and row 2i+1 <-
// row i + head_dim/2. Both conventions then rotate the same pairs by the same angle (frequency i);
// the permutation is the same for q and k of a head, so q.k is unchanged and the result is exact,
// not approximate.
#pragma once

#include "io/checkpoint.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_gguf_weights.h"

namespace md {

namespace testing {
enum class LlamaHfQk : int;  // llama_testing.h
}  // namespace testing

// Throws md::Error naming the tensor and its file when one is missing, has a shape unlike the
// config implies, or a dtype other than BF16, F16 or F32. `qk` is a test seam: its default binds
// q/k permuted as above.
LlamaGgufWeights bind_llama_hf_weights(const Checkpoint& checkpoint, const LlamaConfig& config,
                                       testing::LlamaHfQk qk = {});

}  // namespace md
