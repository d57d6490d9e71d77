// One rank's share of a Muse Spark model under tensor parallelism (the seed's layout, on the
// shared sharding rules of models/common/tensor_shard.h): whole KV heads with their groups of
// query heads (or, with more ranks than KV heads, a replicated KV head and a share of its group)
// — the q, output-gate, k and v rows of those heads and the o columns that read them —, an even
// share of the routed experts (expert parallelism, shard::routed_experts: every rank routes every
// row alike, runs and mixes the chosen experts it holds, and the ranks' partial mixes are summed
// before the post-expert projection) and an even part of the vocabulary for the lm_head. The pre
// and post expert projections, the router, the embedding, the norms and the residual gates stay
// whole on every rank.
#pragma once

#include <string>

#include "models/common/slice_source.h"
#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_weights.h"

namespace md {

struct MuseSparkShard {
  // The rank's heads and KV heads; vocab_size stays whole (the lm_head's rows are the rank's).
  MuseSparkConfig config;
  MuseSparkWeights weights;
};

// Throws md::Error, naming `model`, where the heads cannot be shared among `ranks`. The slices
// come from `slices` (null: cut at load).
MuseSparkShard shard_musespark(const MuseSparkConfig& config, MuseSparkWeights weights, int rank,
                               int ranks, const std::string& model, shard::SliceSource* slices);

}  // namespace md
