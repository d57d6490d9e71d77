#include "models/kimi/kimi_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "base/error.h"
#include "kernels/mxfp4.h"

namespace md {

namespace {

constexpr char kFamily[] = "kimi_k3";
constexpr char kModelPrefix[] = "language_model.model.";

kernels::WeightMatrix matrix(WeightBinder& b, const std::string& name, int64_t rows, int64_t cols) {
  return kernels::WeightMatrix::of(b.matrix(name, rows, cols));
}

// res_norm ⊙ res_proj[0]: a residual mix's score weights (§3, folded at load).
std::vector<float> folded_mix(WeightBinder& b, const std::string& norm, const std::string& proj,
                              int64_t h) {
  std::vector<float> w = b.f32_vector(norm, h);
  const std::vector<float> p = b.f32_tensor(proj, {1, h});
  for (int64_t c = 0; c < h; ++c) w[c] *= p[c];
  return w;
}

// A conv weight [C, 1, K] as [C][K].
std::vector<float> conv(WeightBinder& b, const std::string& name, int64_t channels, int64_t taps) {
  return b.f32_tensor(name, {channels, 1, taps});
}

// An MXFP4 matrix [rows, cols] from `<name>.weight_packed` and `<name>.weight_scale`, read in
// place; a scale byte 0 or 255 (no agreed meaning, §9) is refused with its place.
kernels::WeightMatrix mxfp4(WeightBinder& b, const std::string& name, int64_t rows, int64_t cols) {
  const std::string packed = name + ".weight_packed", scale = name + ".weight_scale";
  const std::uint8_t* codes = b.bytes(packed, DType::kU8, {rows, cols / 2});
  const int64_t groups = cols / kernels::kMxfp4Group;
  const std::uint8_t* scales = b.bytes(scale, DType::kU8, {rows, groups});
  for (int64_t i = 0; i < rows * groups; ++i) {
    if (kernels::e8m0_is_refused(scales[i])) {
      fail(
          "checkpoint {}: {} tensor '{}' holds the E8M0 scale byte {} at row {}, group {}: bytes "
          "0 and 255 have no agreed value (2^-127 or 0; NaN or +inf), so the checkpoint is "
          "refused",
          b.checkpoint().path(), kFamily, scale, scales[i], i / groups, i % groups);
    }
  }
  return kernels::WeightMatrix::of(kernels::Mxfp4Matrix{codes, scales, rows, cols});
}

KimiKdaWeights bind_kda(WeightBinder& b, const std::string& p, const KimiK3Config& c) {
  const int64_t h = c.hidden_size, ch = c.kda_channels(), d = c.kda_head_dim;
  const int64_t heads = c.kda_num_heads, taps = c.short_conv_kernel;
  KimiKdaWeights w;
  w.q_proj = matrix(b, p + "q_proj.weight", ch, h);
  w.k_proj = matrix(b, p + "k_proj.weight", ch, h);
  w.v_proj = matrix(b, p + "v_proj.weight", ch, h);
  w.q_conv = conv(b, p + "q_conv1d.weight", ch, taps);
  w.k_conv = conv(b, p + "k_conv1d.weight", ch, taps);
  w.v_conv = conv(b, p + "v_conv1d.weight", ch, taps);
  w.f_a_proj = matrix(b, p + "f_a_proj.weight", d, h);
  w.f_b_proj = matrix(b, p + "f_b_proj.weight", ch, d);
  w.b_proj = matrix(b, p + "b_proj.weight", heads, h);
  // A_log may be stored padded (K3: 128 entries for 96 heads, §14); the first `heads` are used.
  const std::string a_log = p + "A_log";
  const TensorView* view = b.checkpoint().find(a_log);
  const int64_t stored = view == nullptr ? heads : static_cast<int64_t>(view->numel());
  if (stored < heads) {
    fail("checkpoint {}: {} tensor '{}' has {} entries, fewer than the {} KDA heads",
         b.checkpoint().path(), kFamily, a_log, stored, heads);
  }
  std::vector<float> values = b.f32_values(a_log, stored);
  for (int64_t i = 0; i < heads; ++i) w.exp_a_log.push_back(std::exp(values[i]));
  w.dt_bias = b.f32_vector(p + "dt_bias", ch);
  w.o_norm = b.f32_vector(p + "o_norm.weight", d);
  return w;
}

KimiMlaWeights bind_mla(WeightBinder& b, const std::string& p, const KimiK3Config& c) {
  const int64_t h = c.hidden_size, heads = c.num_attention_heads;
  KimiMlaWeights w;
  w.q_a_proj = matrix(b, p + "q_a_proj.weight", c.q_lora_rank, h);
  w.q_a_norm = b.f32_vector(p + "q_a_layernorm.weight", c.q_lora_rank);
  w.q_b_proj = matrix(b, p + "q_b_proj.weight", heads * c.mla_qk_head_dim(), c.q_lora_rank);
  w.kv_a_proj = matrix(b, p + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, h);
  w.kv_a_norm = b.f32_vector(p + "kv_a_layernorm.weight", c.kv_lora_rank);
  w.kv_b_proj = matrix(b, p + "kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim),
                       c.kv_lora_rank);
  return w;
}

KimiMoeWeights bind_moe(WeightBinder& b, const std::string& p, const KimiK3Config& c) {
  const int64_t h = c.hidden_size, e = c.num_experts, lat = c.routed_expert_hidden_size;
  const int64_t inter = c.moe_intermediate_size, shared = c.shared_intermediate_size();
  KimiMoeWeights w;
  w.router = matrix(b, p + "gate.weight", e, h);
  w.router_bias = b.f32_vector(p + "gate.e_score_correction_bias", e);
  w.latent_down = matrix(b, p + "routed_expert_down_proj.weight", lat, h);
  w.latent_norm = b.f32_vector(p + "routed_expert_norm.weight", lat);
  w.latent_up = matrix(b, p + "routed_expert_up_proj.weight", h, lat);
  if (shared > 0) {
    w.shared_gate = matrix(b, p + "shared_experts.gate_proj.weight", shared, h);
    w.shared_up = matrix(b, p + "shared_experts.up_proj.weight", shared, h);
    w.shared_down = matrix(b, p + "shared_experts.down_proj.weight", h, shared);
  }
  for (int64_t x = 0; x < e; ++x) {
    const std::string ex = fmt::format("{}experts.{}.", p, x);
    w.experts.gate.push_back(mxfp4(b, ex + "w1", inter, lat));
    w.experts.up.push_back(mxfp4(b, ex + "w3", inter, lat));
    w.experts.down.push_back(mxfp4(b, ex + "w2", lat, inter));
  }
  return w;
}

KimiLayerWeights bind_layer(WeightBinder& b, const KimiK3Config& c, int64_t layer) {
  const std::string p = fmt::format("{}layers.{}.", kModelPrefix, layer);
  const int64_t h = c.hidden_size;
  KimiLayerWeights w;
  w.input_norm = b.f32_vector(p + "input_layernorm.weight", h);
  w.post_attention_norm = b.f32_vector(p + "post_attention_layernorm.weight", h);
  w.attention_mix =
      folded_mix(b, p + "self_attention_res_norm.weight", p + "self_attention_res_proj.weight", h);
  w.mlp_mix = folded_mix(b, p + "mlp_res_norm.weight", p + "mlp_res_proj.weight", h);
  const bool kda = c.layer_kind(layer) == KimiLayerKind::kKda;
  const int64_t inner = kda ? c.kda_channels() : c.num_attention_heads * c.v_head_dim;
  w.g_proj = matrix(b, p + "self_attn.g_proj.weight", inner, h);
  w.o_proj = matrix(b, p + "self_attn.o_proj.weight", h, inner);
  if (kda) {
    w.kda = bind_kda(b, p + "self_attn.", c);
  } else {
    w.mla = bind_mla(b, p + "self_attn.", c);
  }
  if (c.is_moe_layer(layer)) {
    w.moe = bind_moe(b, p + "block_sparse_moe.", c);
  } else {
    w.dense_gate = matrix(b, p + "mlp.gate_proj.weight", c.intermediate_size, h);
    w.dense_up = matrix(b, p + "mlp.up_proj.weight", c.intermediate_size, h);
    w.dense_down = matrix(b, p + "mlp.down_proj.weight", h, c.intermediate_size);
  }
  return w;
}

}  // namespace

KimiK3Weights bind_kimi_k3_weights(const Checkpoint& checkpoint, const KimiK3Config& c) {
  KimiK3Weights w;
  WeightBinder b(checkpoint, kFamily, w.owned);
  const int64_t h = c.hidden_size;
  const std::string m = kModelPrefix;
  w.embed_tokens = matrix(b, m + "embed_tokens.weight", c.vocab_size, h);
  w.lm_head = matrix(b, "language_model.lm_head.weight", c.vocab_size, h);
  w.final_norm = b.f32_vector(m + "norm.weight", h);
  w.output_mix =
      folded_mix(b, m + "output_attn_res_norm.weight", m + "output_attn_res_proj.weight", h);
  for (int64_t l = 0; l < c.num_layers; ++l) w.layers.push_back(bind_layer(b, c, l));
  return w;
}

}  // namespace md
