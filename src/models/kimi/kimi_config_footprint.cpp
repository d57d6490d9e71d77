// Parameter, byte and state accounting of a Kimi K3 config (kimi-k3-dspark.md §3 and §10).
#include <map>

#include "base/error.h"
#include "models/kimi/kimi_config.h"

namespace md {

namespace {

std::vector<LayerKindRow> layer_table(const KimiK3Config& c) {
  std::map<std::string, std::vector<int64_t>> rows;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string mixer = c.layer_kind(i) == KimiLayerKind::kKda ? "KDA" : "MLA (no RoPE)";
    rows[mixer + (c.is_moe_layer(i) ? " + latent MoE" : " + dense MLP")].push_back(i);
  }
  std::string kda = fmt::format("{} heads x {}, conv {}, decay bound {:g}", c.kda_num_heads,
                                c.kda_head_dim, c.short_conv_kernel, c.gate_lower_bound);
  std::string mla = fmt::format("{} heads, q_lora {}, kv_lora {}, qk {}+{}, v {}, output gate",
                                c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank,
                                c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim);
  std::vector<LayerKindRow> table;
  for (auto& [name, layers] : rows) {
    table.push_back(LayerKindRow{name, std::move(layers), name.starts_with("KDA") ? kda : mla});
  }
  return table;
}

void add_kda_weights(const KimiK3Config& c, ConfigFootprint& f) {
  int64_t n = c.num_kda_layers();
  int64_t h = c.hidden_size;
  int64_t channels = c.kda_channels();
  int64_t bf16 = 3 * channels * h                   // q, k, v
                 + c.kda_head_dim * h               // f_a_proj (low-rank decay, down)
                 + channels * c.kda_head_dim        // f_b_proj (up)
                 + c.kda_num_heads * h              // b_proj (beta)
                 + channels * h                     // g_proj (output gate)
                 + h * channels;                    // o_proj
  int64_t f32 = 3 * channels * c.short_conv_kernel  // q/k/v conv1d
                + c.kda_num_heads                   // A_log (used entries)
                + channels;                         // dt_bias
  f.add_dense(WeightKind::kLinearAttention, WeightFormat::kBF16, n * bf16);
  f.add_dense(WeightKind::kLinearAttention, WeightFormat::kF32, n * f32);
  f.add_dense(WeightKind::kNorms, WeightFormat::kF32, n * c.kda_head_dim);  // o_norm
}

void add_mla_weights(const KimiK3Config& c, ConfigFootprint& f) {
  int64_t n = c.num_mla_layers();
  int64_t h = c.hidden_size;
  int64_t heads = c.num_attention_heads;
  int64_t per_layer = c.q_lora_rank * h                              // q_a_proj
                      + heads * c.mla_qk_head_dim() * c.q_lora_rank  // q_b_proj
                      + c.mla_latent_cache_width() * h               // kv_a_proj_with_mqa
                      + heads * (c.qk_nope_head_dim + c.v_head_dim) * c.kv_lora_rank  // kv_b
                      + heads * c.v_head_dim * h                                      // g_proj
                      + h * heads * c.v_head_dim;                                     // o_proj
  f.add_dense(WeightKind::kAttention, WeightFormat::kBF16, n * per_layer);
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * (c.q_lora_rank + c.kv_lora_rank));
}

void add_ffn_weights(const KimiK3Config& c, ConfigFootprint& f) {
  int64_t h = c.hidden_size;
  int64_t latent = c.routed_expert_hidden_size;
  int64_t width = c.moe_intermediate_size;
  int64_t moe = c.num_moe_layers();
  f.add_dense(WeightKind::kMlp, WeightFormat::kBF16,
              c.first_k_dense_replace * 3 * c.intermediate_size * h);
  f.add_dense(WeightKind::kRouter, WeightFormat::kBF16, moe * c.num_experts * h);
  f.add_dense(WeightKind::kRouter, WeightFormat::kF32, moe * c.num_experts);  // score bias
  f.add_dense(WeightKind::kMoeProjection, WeightFormat::kBF16, moe * 2 * latent * h);
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, moe * latent);  // routed_expert_norm
  f.add_dense(WeightKind::kSharedExperts, WeightFormat::kBF16,
              moe * 3 * c.shared_intermediate_size() * h);
  // w1 and w3 map latent -> width, w2 maps width -> latent; groups run along the input axis.
  int64_t expert_bytes = 2 * mxfp4_matrix_bytes(width, latent) + mxfp4_matrix_bytes(latent, width);
  f.add_weights(WeightKind::kRoutedExperts, WeightFormat::kMXFP4,
                moe * c.num_experts * 3 * width * latent, moe * c.num_experts * expert_bytes,
                moe * c.num_experts_per_token * expert_bytes);
}

void add_state(const KimiK3Config& c, const FootprintOptions& options, ConfigFootprint& f) {
  int64_t kda = c.num_kda_layers();
  int64_t mla = c.num_mla_layers();
  int64_t d = c.kda_head_dim;
  f.state.push_back(
      StateGroup{"KDA recurrent state",
                 fmt::format("{} layers x [{}][{}][{}] f32", kda, c.kda_num_heads, d, d),
                 kda * c.kda_num_heads * d * d * 4, 0, 0, false});
  int64_t history = c.short_conv_kernel - 1;
  f.state.push_back(StateGroup{
      "KDA conv state",
      fmt::format("{} layers x {{q,k,v}} x [{}][{}] {}", kda, history, c.kda_channels(),
                  weight_format_name(options.conv_state)),
      kda * 3 * history * c.kda_channels() * dense_element_bytes(options.conv_state), 0, 0, false});
  int64_t kv_bytes = dense_element_bytes(options.kv_cache);
  std::string dtype(weight_format_name(options.kv_cache));
  if (options.mla_absorbed) {
    f.state.push_back(StateGroup{"MLA latent cache",
                                 fmt::format("{} layers x [ctx][{} latent + {} shared key] {}", mla,
                                             c.kv_lora_rank, c.qk_rope_head_dim, dtype),
                                 0, mla * c.mla_latent_cache_width() * kv_bytes, 0, false});
  } else {
    f.state.push_back(
        StateGroup{"MLA K/V cache",
                   fmt::format("{} layers x [ctx][{}][{} + {}] {}", mla, c.num_attention_heads,
                               c.mla_qk_head_dim(), c.v_head_dim, dtype),
                   0, mla * c.mla_kv_cache_width() * kv_bytes, 0, false});
  }
}

}  // namespace

ConfigFootprint kimi_k3_footprint(const KimiK3Config& c, const FootprintOptions& options) {
  ConfigFootprint f;
  f.architecture = fmt::format(
      "kimi_k3 decoder: {} layers ({} KDA + {} MLA without RoPE), hidden {}, attention "
      "residuals (block {}), dense MLP {} on the first {} layer(s), latent MoE ({} experts, "
      "top-{}, {} shared, latent {}, width {}, SiTU), vocab {}",
      c.num_layers, c.num_kda_layers(), c.num_mla_layers(), c.hidden_size, c.attn_res_block_size,
      c.intermediate_size, c.first_k_dense_replace, c.num_experts, c.num_experts_per_token,
      c.num_shared_experts, c.routed_expert_hidden_size, c.moe_intermediate_size, c.vocab_size);
  f.max_context = c.max_position_embeddings;
  f.layer_kinds = layer_table(c);
  int64_t h = c.hidden_size;
  f.add_embedding(WeightFormat::kBF16, c.vocab_size, h);
  add_kda_weights(c, f);
  add_mla_weights(c, f);
  add_ffn_weights(c, f);
  // Per layer: input/post-attention norms, two residual norms and two residual projections;
  // at the end: final norm, output residual norm and projection.
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, (6 * c.num_layers + 3) * h);
  f.add_dense(WeightKind::kLmHead, WeightFormat::kBF16, c.vocab_size * h);
  add_state(c, options, f);
  f.notes.push_back(
      "routed experts MXFP4 (compressed-tensors), everything else bf16 with f32 "
      "conv/A_log/dt_bias/o_norm/router bias; vision tower skipped");
  return f;
}

}  // namespace md
