// Test seam of the Llama family: how a Hugging Face checkpoint's q_proj/k_proj rows are bound.
// Production always permutes them for the adjacent-pair RoPE (the value-initialised default);
// kAsStored exists only as tests' negative control: HF's rows through the adjacent-pair RoPE,
// which is wrong. Included by the binding that honours it and by tests, never by a public header.
#pragma once

namespace md::testing {

enum class LlamaHfQk : int {
  kPermuteForAdjacentRope = 0,  // what production runs (llama_hf_weights.h explains why)
  kAsStored,
};

}  // namespace md::testing
