#include "models/musespark/musespark_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "kernels/nvfp4.h"
#include "models/common/int8_dense.h"

namespace md {

namespace {

constexpr char kFamily[] = "muse_spark";
constexpr char kTextPrefix[] = "model.language_model.";

std::vector<float> centred_scale(WeightBinder& b, const std::string& name, int64_t n) {
  std::vector<float> w = b.f32_vector(name, n);
  for (float& x : w) x = 1.0f + x;
  return w;
}

kernels::WeightMatrix matrix(WeightBinder& b, const std::string& name, int64_t rows, int64_t cols) {
  return kernels::WeightMatrix::of(b.matrix(name, rows, cols));
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// The NVFP4 tensors of one layer's experts; a layer holding some of them but not all is an error
// naming the first one missing.
void bind_nvfp4_experts(WeightBinder& b, const std::string& p, const MuseSparkConfig& c,
                        MuseExperts& e) {
  const int64_t experts = c.num_experts, inter = c.moe_intermediate_size;
  const int64_t hm = c.moe_hidden_size, block = kernels::kNvfp4Block;
  for (const int64_t width : {hm, inter}) {
    if (width % block != 0) {
      fail(
          "checkpoint {}: {}gate_up_proj is NVFP4 but its input widths (moe_hidden_size {}, "
          "moe_intermediate_size {}) are not multiples of {}",
          b.checkpoint().path(), p, hm, inter, block);
    }
  }
  e.nvfp4 = true;
  e.gate_up_codes = b.bytes(p + "gate_up_proj", DType::kU8, {experts, 2 * inter, hm / 2});
  e.gate_up_scales =
      b.bytes(p + "gate_up_proj_weight_scale", DType::kF8E4M3, {experts, 2 * inter, hm / block});
  e.gate_up_global = b.f32_values(p + "gate_up_proj_weight_scale_2", experts * 2);
  e.down_codes = b.bytes(p + "down_proj", DType::kU8, {experts, hm, inter / 2});
  e.down_scales =
      b.bytes(p + "down_proj_weight_scale", DType::kF8E4M3, {experts, hm, inter / block});
  e.down_global = b.f32_values(p + "down_proj_weight_scale_2", experts);
}

MuseExperts bind_experts(WeightBinder& b, const std::string& p, const MuseSparkConfig& c) {
  MuseExperts e;
  // ModelOpt marks an NVFP4 layer by its scales (§2: decided per layer by tensor presence).
  if (b.contains(p + "gate_up_proj_weight_scale")) {
    bind_nvfp4_experts(b, p, c, e);
    return e;
  }
  for (const char* scale :
       {"gate_up_proj_weight_scale_2", "down_proj_weight_scale", "down_proj_weight_scale_2"}) {
    if (b.contains(p + scale)) {
      fail(
          "checkpoint {}: tensor '{}{}' is present but '{}gate_up_proj_weight_scale' is missing "
          "(an NVFP4 layer needs every scale)",
          b.checkpoint().path(), p, scale, p);
    }
  }
  e.gate_up =
      b.bf16(p + "gate_up_proj", {c.num_experts, 2 * c.moe_intermediate_size, c.moe_hidden_size});
  e.down = b.bf16(p + "down_proj", {c.num_experts, c.moe_hidden_size, c.moe_intermediate_size});
  return e;
}

MuseLayerWeights bind_layer(WeightBinder& b, const MuseSparkConfig& c, int64_t layer,
                            double gate_floor) {
  const std::string p = fmt::format("{}layers.{}.", kTextPrefix, layer);
  const int64_t h = c.hidden_size, hm = c.moe_hidden_size;
  MuseLayerWeights w;
  w.input_norm = centred_scale(b, p + "input_layernorm.weight", h);
  w.q_proj = matrix(b, p + "self_attn.q_proj.weight", c.q_dim(), h);
  w.k_proj = matrix(b, p + "self_attn.k_proj.weight", c.kv_dim(), h);
  w.v_proj = matrix(b, p + "self_attn.v_proj.weight", c.kv_dim(), h);
  w.gate_proj = matrix(b, p + "self_attn.gate_proj.weight", c.q_dim(), h);
  w.o_proj = matrix(b, p + "self_attn.o_proj.weight", h, c.q_dim());
  w.attention_gate =
      residual_gate_coefficients(b.f32_vector(p + "post_attention_residual_gate.gate", h),
                                 c.residual_gate_temperature, gate_floor);
  w.pre_ffn_norm = centred_scale(b, p + "pre_feedforward_layernorm.weight", h);
  w.post_ffn_norm = centred_scale(b, p + "post_feedforward_layernorm.weight", h);
  w.ffn_gate =
      residual_gate_coefficients(b.f32_vector(p + "post_feedforward_residual_gate.gate", h),
                                 c.residual_gate_temperature, gate_floor);
  w.router = b.f32_tensor(p + "mlp.gate.weight", {c.num_experts, h});
  w.router_bias = b.f32_vector(p + "mlp.gate.e_score_correction_bias", c.num_experts);
  w.pre_expert_proj = matrix(b, p + "mlp.pre_expert_proj.weight", hm, h);
  w.pre_expert_norm = centred_scale(b, p + "mlp.pre_expert_norm.weight", hm);
  w.post_expert_norm = centred_scale(b, p + "mlp.experts.post_expert_norm.weight", hm);
  w.post_expert_proj = matrix(b, p + "mlp.post_expert_proj.weight", h, hm);
  w.experts = bind_experts(b, p + "mlp.experts.", c);
  return w;
}

}  // namespace

std::size_t quantize_dense_int8(MuseSparkWeights& weights, ThreadPool* pool) {
  std::size_t bytes = 0;
  const auto int8 = [&](kernels::WeightMatrix& m, const std::string& name) {
    m = quantized_int8(m, name, weights.owned, pool);
    bytes += m.bytes(0, m.rows);  // with the row scales
  };
  int8(weights.lm_head, "lm_head");
  for (std::size_t l = 0; l < weights.layers.size(); ++l) {
    MuseLayerWeights& w = weights.layers[l];
    const std::string p = fmt::format("layer {} ", l);
    int8(w.q_proj, p + "q_proj");
    int8(w.k_proj, p + "k_proj");
    int8(w.v_proj, p + "v_proj");
    int8(w.gate_proj, p + "gate_proj");
    int8(w.o_proj, p + "o_proj");
    int8(w.pre_expert_proj, p + "pre_expert_proj");
    int8(w.post_expert_proj, p + "post_expert_proj");
  }
  return bytes;
}

MuseResidualGate residual_gate_coefficients(const std::vector<float>& gate, double temperature,
                                            double floor) {
  MuseResidualGate g;
  const auto t = static_cast<float>(temperature);
  for (const float x : gate) {
    const float u = x / t;
    const float beta = sigmoid(u);
    const float alpha_squared = sigmoid(-u) * (1.0f + beta);
    g.beta.push_back(beta);
    g.alpha.push_back(std::sqrt(std::max(alpha_squared, static_cast<float>(floor))));
  }
  return g;
}

MuseSparkWeights bind_musespark_weights(const Checkpoint& checkpoint, const MuseSparkConfig& config,
                                        double gate_floor) {
  MuseSparkWeights w;
  WeightBinder b(checkpoint, kFamily, w.owned);
  const std::string p = kTextPrefix;
  w.embed_tokens = kernels::WeightMatrix::of(
      b.matrix(p + "embed_tokens.weight", config.vocab_size, config.hidden_size));
  w.lm_head =
      kernels::WeightMatrix::of(b.matrix("lm_head.weight", config.vocab_size, config.hidden_size));
  w.final_norm = b.f32_vector(p + "norm.weight", config.hidden_size);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    w.layers.push_back(bind_layer(b, config, layer, gate_floor));
  }
  return w;
}

}  // namespace md
