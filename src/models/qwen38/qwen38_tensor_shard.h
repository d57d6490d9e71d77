// One rank's share of a Qwen3.8 / Qwen3.5 model under tensor parallelism (the seed's
// layout, on models/common/tensor_shard.h): gated-attention layers by whole KV heads with their
// query groups (or replicated KV heads, as for Llama), Gated DeltaNet layers by whole key heads
// with their value heads — q, k and v channels, z, b and a, conv taps, decays and the out_proj
// columns of those heads, in either value-head layout (transformers' grouped one or llama.cpp's
// tiled one) —, FFN columns in whole blocks, and an even part of the vocabulary. The embedding
// and the norms stay whole; a projection bias of a row-parallel matrix (o) stays on rank 0 only,
// so that the sum across ranks adds it once. A Qwen3.5-MoE block keeps its router whole, deals its
// routed experts to the ranks (expert parallelism, shard::routed_experts) and shares its shared
// expert's columns; the ranks' partial sums meet in one all-reduce into the residual stream.
#pragma once

#include <string>

#include "models/common/slice_source.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_weights.h"

namespace md {

struct Qwen38Shard {
  // The rank's heads, KV heads, key and value heads and FFN columns; vocab_size stays whole.
  Qwen38Config config;
  Qwen38Weights weights;
};

// Throws md::Error, naming `model`, for more ranks than Gated DeltaNet key heads or routed
// experts, or heads and formats that cannot be shared among `ranks`.
// The matrix slices come from `slices` (models/common/slice_source.h; null: cut at load).
Qwen38Shard shard_qwen38(const Qwen38Config& config, Qwen38Weights weights, int rank, int ranks,
                         const std::string& model, shard::SliceSource* slices);

}  // namespace md
