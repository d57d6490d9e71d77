// Parameter, byte and state accounting of a Muse Spark config (muse-spark-nvfp4.md §2, §5, §6).
#include "base/error.h"
#include "models/musespark/musespark_config.h"

namespace md {

namespace {

std::vector<int64_t> layers_of_kind(const MuseSparkConfig& c, MuseLayerKind kind) {
  std::vector<int64_t> layers;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.layer_kind(l) == kind) layers.push_back(l);
  }
  return layers;
}

// `params` weights in `rows` output rows, as stored (bf16) or quantised at load to int8 with an f32
// scale per row (§7), read whole every token.
void add_matrices(ConfigFootprint& f, WeightKind kind, int64_t params, int64_t rows, bool int8) {
  if (!int8) {
    f.add_dense(kind, WeightFormat::kBF16, params);
    return;
  }
  const int64_t bytes = params + rows * 4;
  f.add_weights(kind, WeightFormat::kInt8, params, bytes, bytes);
}

void add_dense_layer_weights(const MuseSparkConfig& c, bool int8, ConfigFootprint& f) {
  int64_t n = c.num_layers;
  int64_t h = c.hidden_size;
  int64_t hm = c.moe_hidden_size;
  // q, gate and o are [q_dim, H] / [H, q_dim]; k and v [kv_dim, H].
  add_matrices(f, WeightKind::kAttention, n * (3 * c.q_dim() * h + 2 * c.kv_dim() * h),
               n * (2 * c.q_dim() + h + 2 * c.kv_dim()), int8);
  // Router weight and selection bias are f32 in the checkpoint (never quantised).
  f.add_dense(WeightKind::kRouter, WeightFormat::kF32, n * (c.num_experts * h + c.num_experts));
  add_matrices(f, WeightKind::kMoeProjection, n * 2 * hm * h, n * (hm + h), int8);
  // input, pre-FFN and post-FFN norms, two residual gates; pre/post expert norms.
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, n * (5 * h + 2 * hm));
}

void add_expert_weights(const MuseSparkConfig& c, ConfigFootprint& f) {
  int64_t hm = c.moe_hidden_size;
  int64_t width = c.moe_intermediate_size;
  int64_t params = 3 * width * hm;  // gate_up [2I, Hm] + down [Hm, I]
  for (WeightFormat format : c.expert_formats) {
    int64_t expert_bytes = params * 2;
    int64_t read_bytes = expert_bytes;
    if (format == WeightFormat::kNVFP4) {
      // Codes and e4m3 block scales, plus f32 global scales (read) and input scales (stored,
      // never read): one each for the gate and up halves and one for down.
      read_bytes = nvfp4_matrix_bytes(2 * width, hm) + nvfp4_matrix_bytes(hm, width) + 3 * 4;
      expert_bytes = read_bytes + 3 * 4;
    }
    f.add_weights(WeightKind::kRoutedExperts, format, c.num_experts * params,
                  c.num_experts * expert_bytes, c.num_experts_per_token * read_bytes);
  }
}

void add_state(const MuseSparkConfig& c, const FootprintOptions& options, ConfigFootprint& f) {
  int64_t row = 2 * c.kv_dim() * dense_element_bytes(options.kv_cache);  // K and V, one token
  std::string dtype(weight_format_name(options.kv_cache));
  int64_t full = c.num_full_attention_layers();
  int64_t sliding = c.num_sliding_layers();
  f.state.push_back(StateGroup{"KV cache (full attention)",
                               fmt::format("{} layers x {{K,V}} x [ctx][{}][{}] {}", full,
                                           c.num_key_value_heads, c.head_dim, dtype),
                               0, full * row, 0, false});
  f.state.push_back(
      StateGroup{"KV cache (sliding window)",
                 fmt::format("{} layers x {{K,V}} x [{}][{}][{}] {}", sliding,
                             options.sliding_window_ring
                                 ? fmt::format("ring {}+{}", c.sliding_window, kMuseVerifyRows)
                                 : "ctx",
                             c.num_key_value_heads, c.head_dim, dtype),
                 0, sliding * row, c.sliding_window, options.sliding_window_ring,
                 options.sliding_window_ring ? kMuseVerifyRows : 0});
}

}  // namespace

ConfigFootprint musespark_footprint(const MuseSparkConfig& c, const FootprintOptions& options) {
  ConfigFootprint f;
  f.architecture = fmt::format(
      "muse_spark decoder: {} layers ({} sliding-window {} RoPE + {} full NoPE attention), "
      "hidden {}, gated residuals, latent MoE on every layer ({} experts, top-{}, latent {}, "
      "width {}), vocab {} ({} used), softcap {:g}",
      c.num_layers, c.num_sliding_layers(), c.sliding_window, c.num_full_attention_layers(),
      c.hidden_size, c.num_experts, c.num_experts_per_token, c.moe_hidden_size,
      c.moe_intermediate_size, c.vocab_size, c.vocab_used, c.final_logit_softcapping);
  f.max_context = c.max_position_embeddings;
  std::string heads = fmt::format("{} q / {} kv heads x {}, QK norm, output norm + gate",
                                  c.num_attention_heads, c.num_key_value_heads, c.head_dim);
  f.layer_kinds.push_back(LayerKindRow{
      "sliding attention + MoE", layers_of_kind(c, MuseLayerKind::kSlidingAttention),
      fmt::format("{}, window {}, rotary theta {:g}", heads, c.sliding_window, c.rope_theta)});
  f.layer_kinds.push_back(LayerKindRow{"full attention (NoPE) + MoE",
                                       layers_of_kind(c, MuseLayerKind::kFullAttention), heads});
  f.add_embedding(WeightFormat::kBF16, c.vocab_size, c.hidden_size);
  add_dense_layer_weights(c, options.dense_int8, f);
  add_expert_weights(c, f);
  f.add_dense(WeightKind::kNorms, WeightFormat::kBF16, c.hidden_size);  // final norm
  add_matrices(f, WeightKind::kLmHead, c.vocab_size * c.hidden_size, c.vocab_size,
               options.dense_int8);
  add_state(c, options, f);
  if (options.dense_int8) {
    f.notes.push_back(
        "dense matrices (attention, latent projections, lm_head) quantised at load to int8 with "
        "an f32 scale per output row (--dense-weights int8); the checkpoint keeps them in bf16");
  }
  if (c.quantization.quantized()) {
    f.notes.push_back(
        fmt::format("experts NVFP4 ({}) on layers 1..{}, bf16 on the first and "
                    "last layer (vendor layout, confirmed per layer at load)",
                    quant_method_name(c.quantization.method), c.num_layers - 2));
  }
  return f;
}

}  // namespace md
