#include "models/musespark/musespark_tensor_shard.h"

#include <fmt/format.h>

#include <utility>

#include "models/common/tensor_shard.h"

namespace md {

using shard::scaled;

MuseSparkShard shard_musespark(const MuseSparkConfig& config, MuseSparkWeights weights, int rank,
                               int ranks, const std::string& model, shard::SliceSource* slices) {
  const shard::HeadShard heads = shard::attention_heads(
      config.num_attention_heads, config.num_key_value_heads, rank, ranks, model);
  (void)shard::routed_experts(config.num_experts, rank, ranks, model);
  const int64_t hd = config.head_dim;
  const shard::Range q = scaled(heads.heads, hd), kv = scaled(heads.kv_heads, hd);

  MuseSparkShard out{config, std::move(weights)};
  out.config.num_attention_heads = heads.heads.size();
  out.config.num_key_value_heads = heads.kv_heads.size();
  MuseSparkWeights& w = out.weights;
  shard::Slicer take(slices, w.sliced, model);
  w.slice_storage = take.storage();
  w.lm_head = take.rows(w.lm_head, shard::even_part(config.vocab_size, ranks, rank), "lm_head");
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    MuseLayerWeights& l = w.layers[i];
    const std::string tag = fmt::format("layer {} ", i);
    l.q_proj = take.rows(l.q_proj, q, tag + "q_proj");
    l.gate_proj = take.rows(l.gate_proj, q, tag + "gate_proj");
    l.k_proj = take.rows(l.k_proj, kv, tag + "k_proj");
    l.v_proj = take.rows(l.v_proj, kv, tag + "v_proj");
    l.o_proj = take.columns(l.o_proj, q, tag + "o_proj");
  }
  return out;
}

}  // namespace md
