// Parameter, byte and state accounting of a qwen3_5 config (spec qwen38-dflash2.md §2 and §9).
#include "base/error.h"
#include "models/qwen38/qwen38_config.h"

namespace md {

namespace {

std::vector<int64_t> layers_of_kind(const Qwen38Config& config, Qwen38LayerKind kind) {
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    if (config.layer_kind(i) == kind) layers.push_back(i);
  }
  return layers;
}

void add_gdn_weights(const Qwen38Config& c, ConfigFootprint& footprint) {
  int64_t n = c.num_linear_attention_layers();
  int64_t h = c.hidden_size;
  int64_t heads = c.linear_num_value_heads;
  int64_t per_layer = c.conv_dim() * h                       // in_proj_qkv
                      + c.value_dim() * h                    // in_proj_z
                      + 2 * heads * h                        // in_proj_b, in_proj_a
                      + c.conv_dim() * c.linear_conv_kernel  // conv1d
                      + heads                                // dt_bias
                      + h * c.value_dim();                   // out_proj
  footprint.add_dense(WeightKind::kLinearAttention, WeightFormat::kBF16, n * per_layer);
  // A_log ships as F32 in the release.
  footprint.add_dense(WeightKind::kLinearAttention, WeightFormat::kF32, n * heads);
  footprint.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * c.linear_value_head_dim);
}

void add_attention_weights(const Qwen38Config& c, ConfigFootprint& footprint) {
  int64_t n = c.num_full_attention_layers();
  int64_t h = c.hidden_size;
  int64_t per_layer = c.q_proj_dim() * h + 2 * c.kv_dim() * h + h * c.attn_output_dim();
  footprint.add_dense(WeightKind::kAttention, WeightFormat::kBF16, n * per_layer);
  footprint.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * 2 * c.head_dim);  // q/k norm
}

// Dense: gate, up and down of the SwiGLU MLP. MoE: the router, the routed experts (a token reads
// top-k of them), the shared expert and its one-row sigmoid gate.
void add_mlp_weights(const Qwen38Config& c, ConfigFootprint& footprint) {
  const int64_t h = c.hidden_size, layers = c.num_layers;
  if (!c.is_moe()) {
    footprint.add_dense(WeightKind::kMlp, WeightFormat::kBF16,
                        layers * 3 * c.intermediate_size * h);
    return;
  }
  const Qwen38Moe& m = c.moe;
  footprint.add_dense(WeightKind::kRouter, WeightFormat::kBF16, layers * m.experts * h);
  const int64_t expert = 3 * m.intermediate * h;
  const int64_t bytes = dense_element_bytes(WeightFormat::kBF16);
  footprint.add_weights(WeightKind::kRoutedExperts, WeightFormat::kBF16,
                        layers * m.experts * expert, layers * m.experts * expert * bytes,
                        layers * m.experts_per_token * expert * bytes);
  footprint.add_dense(WeightKind::kSharedExperts, WeightFormat::kBF16,
                      layers * (3 * m.shared_intermediate * h + h));
}

void add_state(const Qwen38Config& c, const FootprintOptions& options, ConfigFootprint& footprint) {
  int64_t attention = c.num_full_attention_layers();
  int64_t gdn = c.num_linear_attention_layers();
  int64_t kv_bytes = dense_element_bytes(options.kv_cache);
  footprint.state.push_back(StateGroup{
      "KV cache",
      fmt::format("{} layers x {{K,V}} x [{}][ctx][{}] {}", attention, c.num_key_value_heads,
                  c.head_dim, weight_format_name(options.kv_cache)),
      0, attention * 2 * c.kv_dim() * kv_bytes, 0, false});
  footprint.state.push_back(StateGroup{
      "GDN recurrent state",
      fmt::format("{} layers x [{}][{}][{}] f32", gdn, c.linear_num_value_heads,
                  c.linear_key_head_dim, c.linear_value_head_dim),
      gdn * c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim * 4, 0, 0,
      false});
  int64_t history = c.linear_conv_kernel - 1;
  footprint.state.push_back(StateGroup{
      "GDN conv state",
      fmt::format("{} layers x [{}][{}] {}", gdn, c.conv_dim(), history,
                  weight_format_name(options.conv_state)),
      gdn * c.conv_dim() * history * dense_element_bytes(options.conv_state), 0, 0, false});
}

}  // namespace

ConfigFootprint qwen38_footprint(const Qwen38Config& c, const FootprintOptions& options) {
  ConfigFootprint footprint;
  int64_t gdn = c.num_linear_attention_layers();
  int64_t attention = c.num_full_attention_layers();
  const std::string mlp =
      c.is_moe()
          ? fmt::format("MoE {} experts top-{} x {} + shared expert {}", c.moe.experts,
                        c.moe.experts_per_token, c.moe.intermediate, c.moe.shared_intermediate)
          : fmt::format("{} MLP {}",
                        c.hidden_act == kernels::Activation::kSilu ? "SwiGLU" : "gated",
                        c.intermediate_size);
  const std::string act =
      c.hidden_act == kernels::Activation::kSilu
          ? ""
          : fmt::format(", hidden_act {}", kernels::activation_name(c.hidden_act));
  footprint.architecture = fmt::format(
      "{} hybrid decoder: {} layers ({} Gated DeltaNet + {} gated GQA attention), hidden {}, {}{}, "
      "vocab {}, {} lm_head",
      c.is_moe() ? "qwen3_5_moe" : "qwen3_5", c.num_layers, gdn, attention, c.hidden_size, mlp, act,
      c.vocab_size, c.tie_word_embeddings ? "tied" : "untied");
  footprint.max_context = c.max_position_embeddings;
  footprint.layer_kinds.push_back(
      LayerKindRow{c.is_moe() ? "Gated DeltaNet + MoE" : "Gated DeltaNet + MLP",
                   layers_of_kind(c, Qwen38LayerKind::kLinearAttention),
                   fmt::format("{} k-heads x {}, {} v-heads x {}, conv {}", c.linear_num_key_heads,
                               c.linear_key_head_dim, c.linear_num_value_heads,
                               c.linear_value_head_dim, c.linear_conv_kernel)});
  footprint.layer_kinds.push_back(LayerKindRow{
      c.is_moe() ? "gated attention + MoE" : "gated attention + MLP",
      layers_of_kind(c, Qwen38LayerKind::kFullAttention),
      fmt::format("{} q / {} kv heads x {}, sigmoid output gate, rotary {} (theta {:g})",
                  c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rotary_dim(),
                  c.rope_theta)});

  int64_t h = c.hidden_size;
  footprint.add_embedding(WeightFormat::kBF16, c.vocab_size, h);
  add_gdn_weights(c, footprint);
  add_attention_weights(c, footprint);
  add_mlp_weights(c, footprint);
  // input/post-attention norms per layer, the final norm.
  footprint.add_dense(WeightKind::kNorms, WeightFormat::kBF16, (2 * c.num_layers + 1) * h);
  if (c.tie_word_embeddings) {
    // The embedding table doubles as lm_head: no extra storage, but every token reads it whole.
    footprint.add_weights(WeightKind::kLmHead, WeightFormat::kBF16, 0, 0,
                          c.vocab_size * h * dense_element_bytes(WeightFormat::kBF16),
                          c.vocab_size * h);
  } else {
    footprint.add_dense(WeightKind::kLmHead, WeightFormat::kBF16, c.vocab_size * h);
  }
  add_state(c, options, footprint);
  footprint.notes.push_back("weights bf16 as released (A_log f32); MTP and vision tensors skipped");
  return footprint;
}

}  // namespace md
