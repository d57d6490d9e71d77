// One rank's share of a Llama model under tensor parallelism (the seed's layout, on the shared
// sharding rules of models/common/tensor_shard.h): whole KV heads with their query-head groups
// (or, with more ranks than KV heads, a replicated KV head and a share of its group), FFN columns
// in whole blocks of the down matrix's format, and an even part of the vocabulary for the
// lm_head. q, k, v, gate, up and the lm_head keep the rank's rows; o and down the matching
// columns (their products are summed across the ranks). The embedding and the norms stay whole.
#pragma once

#include <string>

#include "models/common/slice_source.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_gguf_weights.h"

namespace md {

struct LlamaShard {
  // The rank's share: its heads, KV heads and FFN columns; vocab_size stays the whole
  // vocabulary (tokens are checked against it), the lm_head's rows are the rank's part.
  LlamaConfig config;
  LlamaGgufWeights weights;
};

// Throws md::Error, naming `model`, where the model's heads cannot be shared among `ranks`.
// The matrix slices come from `slices` (models/common/slice_source.h; null: cut at load).
LlamaShard shard_llama(const LlamaConfig& config, LlamaGgufWeights weights, int rank, int ranks,
                       const std::string& model, shard::SliceSource* slices);

}  // namespace md
