#include "models/kimi/kimi_tensor_shard.h"

#include <fmt/format.h>

#include <utility>

#include "base/error.h"
#include "models/common/tensor_shard.h"

namespace md {

namespace {

using shard::scaled;

// A row-split vector of `width` values per row (conv taps, dt_bias).
std::vector<float> rows_of(const std::vector<float>& v, int64_t width, shard::Range rows) {
  return shard::rows_of(v, width, std::span<const shard::Range>(&rows, 1));
}

void shard_kda(KimiLayerWeights& l, const KimiK3Config& c, shard::Range heads, shard::Slicer& take,
               const std::string& tag) {
  const shard::Range channels = scaled(heads, c.kda_head_dim);
  KimiKdaWeights& w = l.kda;
  w.q_proj = take.rows(w.q_proj, channels, tag + "q_proj");
  w.k_proj = take.rows(w.k_proj, channels, tag + "k_proj");
  w.v_proj = take.rows(w.v_proj, channels, tag + "v_proj");
  l.g_proj = take.rows(l.g_proj, channels, tag + "g_proj");
  w.f_b_proj = take.rows(w.f_b_proj, channels, tag + "f_b_proj");
  w.b_proj = take.rows(w.b_proj, heads, tag + "b_proj");
  l.o_proj = take.columns(l.o_proj, channels, tag + "o_proj");
  for (std::vector<float>* conv : {&w.q_conv, &w.k_conv, &w.v_conv}) {
    *conv = rows_of(*conv, c.short_conv_kernel, channels);  // [C][K]
  }
  w.exp_a_log = rows_of(w.exp_a_log, 1, heads);
  w.dt_bias = rows_of(w.dt_bias, 1, channels);
}

void shard_mla(KimiLayerWeights& l, const KimiK3Config& c, shard::Range heads, shard::Slicer& take,
               const std::string& tag) {
  KimiMlaWeights& w = l.mla;
  const shard::Range values = scaled(heads, c.v_head_dim);
  w.q_b_proj = take.rows(w.q_b_proj, scaled(heads, c.mla_qk_head_dim()), tag + "q_b_proj");
  w.kv_b_proj =
      take.rows(w.kv_b_proj, scaled(heads, c.qk_nope_head_dim + c.v_head_dim), tag + "kv_b_proj");
  l.g_proj = take.rows(l.g_proj, values, tag + "g_proj");
  l.o_proj = take.columns(l.o_proj, values, tag + "o_proj");
}

// gate and up rows, down columns: an even share of the intermediate width.
void shard_mlp(kernels::WeightMatrix& gate, kernels::WeightMatrix& up, kernels::WeightMatrix& down,
               int rank, int ranks, shard::Slicer& take, const std::string& tag) {
  const shard::Range part = shard::even_part(gate.rows, ranks, rank, shard::column_unit(down));
  gate = take.rows(gate, part, tag + "gate_proj");
  up = take.rows(up, part, tag + "up_proj");
  down = take.columns(down, part, tag + "down_proj");
}

}  // namespace

KimiShard shard_kimi(const KimiK3Config& config, KimiK3Weights weights, int rank, int ranks,
                     const std::string& model, shard::SliceSource* slices) {
  const shard::Range kda = shard::even_share(config.kda_num_heads, rank, ranks, "KDA heads", model);
  const shard::Range mla =
      shard::even_share(config.num_attention_heads, rank, ranks, "MLA heads", model);
  (void)shard::routed_experts(config.num_experts, rank, ranks, model);
  if ((config.first_k_dense_replace > 0 && config.intermediate_size < ranks) ||
      (config.num_shared_experts > 0 && config.shared_intermediate_size() < ranks)) {
    fail("{}: {} ranks cannot share the MLP's {} (shared experts' {}) columns", model, ranks,
         config.intermediate_size, config.shared_intermediate_size());
  }
  KimiShard out{config, std::move(weights)};
  out.config.kda_num_heads = kda.size();
  out.config.num_attention_heads = mla.size();
  KimiK3Weights& w = out.weights;
  shard::Slicer take(slices, w.sliced, model);
  w.slice_storage = take.storage();
  w.lm_head = take.rows(w.lm_head, shard::even_part(config.vocab_size, ranks, rank), "lm_head");
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    KimiLayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    const std::string tag = fmt::format("layer {} ", i);
    if (config.layer_kind(layer) == KimiLayerKind::kKda) {
      shard_kda(l, config, kda, take, tag);
    } else {
      shard_mla(l, config, mla, take, tag);
    }
    if (!config.is_moe_layer(layer)) {
      shard_mlp(l.dense_gate, l.dense_up, l.dense_down, rank, ranks, take, tag);
    } else if (config.num_shared_experts > 0) {
      shard_mlp(l.moe.shared_gate, l.moe.shared_up, l.moe.shared_down, rank, ranks, take,
                tag + "shared_experts ");
    }
  }
  if (config.first_k_dense_replace > 0) out.config.intermediate_size = w.layers[0].dense_gate.rows;
  return out;
}

}  // namespace md
