// One rank's share of a Kimi K3 model under tensor parallelism (ARCHITECTURE.md "Tensor
// parallelism", after the seed's layout on the shared rules of models/common/tensor_shard.h):
// - KDA: even shares of the heads — the q, k, v and output-gate rows of their channels, their
//   short convs, f_b rows, β rows, exp(A_log) and dt_bias, and the o columns that read them; the
//   low-rank f_a and the output norm (one per head width) stay whole;
// - MLA: even shares of the heads — q_b, kv_b and output-gate rows, o columns; q_a, kv_a and
//   their norms stay whole, so every rank writes the same absorbed latent cache (the latent is
//   shared by all heads: there is no per-head part of it to split, unlike the seed's expanded
//   per-head keys and values);
// - the dense MLP and the shared experts: gate and up rows, down columns;
// - the routed experts: expert parallelism, each rank an even share of the experts
//   (shard::routed_experts); every rank routes every row alike (router and bias whole), runs the
//   chosen experts it holds and mixes their products, and the ranks' partial mixes are summed
//   before the latent norm; latent down, latent up and the latent norm stay whole;
// - the lm_head: an even part of the vocabulary.
// The embedding, the attention-residual weights and every norm stay whole.
#pragma once

#include <string>

#include "dist/partition.h"
#include "models/common/slice_source.h"
#include "models/kimi/kimi_config.h"
#include "models/kimi/kimi_weights.h"

namespace md {

struct KimiShard {
  // The rank's KDA and MLA heads and dense intermediate size; vocab_size and the experts stay
  // whole (the lm_head's rows and the experts run are the rank's). shared_intermediate_size()
  // still gives the whole shared experts' width (its factor, moe_intermediate_size, is the routed
  // experts' too): the rank's share is the width of its shared_gate rows.
  KimiK3Config config;
  KimiK3Weights weights;
};

// Throws md::Error, naming `model`, where the heads or experts cannot be shared among `ranks`
// (more ranks than KDA heads, MLA heads or experts). The slices come from `slices` (null: cut at
// load).
KimiShard shard_kimi(const KimiK3Config& config, KimiK3Weights weights, int rank, int ranks,
                     const std::string& model, shard::SliceSource* slices);

}  // namespace md
