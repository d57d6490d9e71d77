#include "models/qwen38/qwen38_weights.h"

#include <initializer_list>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gguf_matmul_q8.h"
#include "kernels/gguf_q8_packing.h"

namespace md {

namespace {

constexpr char kFamily[] = "qwen3_5";

kernels::WeightMatrix matrix(WeightBinder& bind, const std::string& name, int64_t rows,
                             int64_t cols) {
  return kernels::WeightMatrix::of(bind.matrix(name, rows, cols));
}

std::vector<float> norm_scale(WeightBinder& bind, const std::string& name, int64_t n) {
  return zero_centred_scale(bind.bf16(name, {n}), n);
}

std::string find_prefix(const Checkpoint& checkpoint) {
  for (const char* prefix : {"model.language_model.", "model."}) {
    if (checkpoint.contains(std::string(prefix) + "embed_tokens.weight")) return prefix;
  }
  fail(
      "checkpoint {}: no 'model.language_model.embed_tokens.weight' or "
      "'model.embed_tokens.weight' tensor: not a qwen3_5 text checkpoint",
      checkpoint.path());
}

Qwen38GdnWeights bind_gdn(const Qwen38Config& c, WeightBinder& bind, const std::string& p) {
  int64_t h = c.hidden_size;
  int64_t heads = c.linear_num_value_heads;
  Qwen38GdnWeights w;
  w.in_proj_qkv = matrix(bind, p + "in_proj_qkv.weight", c.conv_dim(), h);
  w.in_proj_z = matrix(bind, p + "in_proj_z.weight", c.value_dim(), h);
  w.in_proj_b = matrix(bind, p + "in_proj_b.weight", heads, h);
  w.in_proj_a = matrix(bind, p + "in_proj_a.weight", heads, h);
  w.conv1d = widened(bind.bf16(p + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel}),
                     c.conv_dim() * c.linear_conv_kernel);
  for (float a_log : bind.f32_vector(p + "A_log", heads)) {
    w.decay_factor.push_back(kernels::delta_net_decay_factor(a_log));
  }
  w.dt_bias = bind.f32_vector(p + "dt_bias", heads);
  w.norm =
      widened(bind.bf16(p + "norm.weight", {c.linear_value_head_dim}), c.linear_value_head_dim);
  w.out_proj = matrix(bind, p + "out_proj.weight", h, c.value_dim());
  return w;
}

Qwen38AttentionWeights bind_attention(const Qwen38Config& c, WeightBinder& bind,
                                      const std::string& p) {
  int64_t h = c.hidden_size;
  Qwen38AttentionWeights w;
  w.q_proj = matrix(bind, p + "q_proj.weight", c.q_proj_dim(), h);
  w.k_proj = matrix(bind, p + "k_proj.weight", c.kv_dim(), h);
  w.v_proj = matrix(bind, p + "v_proj.weight", c.kv_dim(), h);
  w.o_proj = matrix(bind, p + "o_proj.weight", h, c.attn_output_dim());
  w.q_norm = norm_scale(bind, p + "q_norm.weight", c.head_dim);
  w.k_norm = norm_scale(bind, p + "k_norm.weight", c.head_dim);
  if (c.attention_bias) {
    w.q_bias = bind.f32_vector(p + "q_proj.bias", c.q_proj_dim());
    w.k_bias = bind.f32_vector(p + "k_proj.bias", c.kv_dim());
    w.v_bias = bind.f32_vector(p + "v_proj.bias", c.kv_dim());
    w.o_bias = bind.f32_vector(p + "o_proj.bias", h);
  }
  return w;
}

// Expert e of a stacked [experts][rows][cols] tensor: its rows [first, first + rows).
kernels::WeightMatrix expert_rows(const kernels::Bf16Matrix& stack, int64_t first, int64_t rows) {
  return kernels::WeightMatrix::of(
      kernels::Bf16Matrix{stack.data + first * stack.cols, rows, stack.cols, stack.inputs});
}

// The routed experts as the released checkpoints and transformers 5 store them (gate_up_proj
// [E, 2I, H]: gate rows then up rows per expert; down_proj [E, H, I]), or as older writers did,
// one gate_proj / up_proj / down_proj per expert.
kernels::ExpertMatrices bind_experts(const Qwen38Moe& m, int64_t h, WeightBinder& bind,
                                     const std::string& p) {
  kernels::ExpertMatrices experts;
  const int64_t i = m.intermediate;
  if (!bind.contains(p + "gate_up_proj") && bind.contains(p + "0.gate_proj.weight")) {
    for (int64_t e = 0; e < m.experts; ++e) {
      const std::string q = fmt::format("{}{}.", p, e);
      experts.gate.push_back(matrix(bind, q + "gate_proj.weight", i, h));
      experts.up.push_back(matrix(bind, q + "up_proj.weight", i, h));
      experts.down.push_back(matrix(bind, q + "down_proj.weight", h, i));
    }
    return experts;
  }
  const kernels::Bf16Matrix gate_up{bind.bf16(p + "gate_up_proj", {m.experts, 2 * i, h}),
                                    m.experts * 2 * i, h};
  const kernels::Bf16Matrix down{bind.bf16(p + "down_proj", {m.experts, h, i}), m.experts * h, i};
  for (int64_t e = 0; e < m.experts; ++e) {
    experts.gate.push_back(expert_rows(gate_up, 2 * i * e, i));
    experts.up.push_back(expert_rows(gate_up, 2 * i * e + i, i));
    experts.down.push_back(expert_rows(down, h * e, h));
  }
  return experts;
}

Qwen38MoeWeights bind_moe(const Qwen38Config& c, WeightBinder& bind, const std::string& p) {
  const int64_t h = c.hidden_size, shared = c.moe.shared_intermediate;
  Qwen38MoeWeights w;
  w.router = matrix(bind, p + "gate.weight", c.moe.experts, h);
  w.experts = bind_experts(c.moe, h, bind, p + "experts.");
  w.shared_gate_proj = matrix(bind, p + "shared_expert.gate_proj.weight", shared, h);
  w.shared_up_proj = matrix(bind, p + "shared_expert.up_proj.weight", shared, h);
  w.shared_down_proj = matrix(bind, p + "shared_expert.down_proj.weight", h, shared);
  w.shared_expert_gate = matrix(bind, p + "shared_expert_gate.weight", 1, h);
  return w;
}

Qwen38LayerWeights bind_layer(const Qwen38Config& c, WeightBinder& bind, const std::string& p,
                              int64_t layer) {
  int64_t h = c.hidden_size;
  Qwen38LayerWeights w;
  w.input_layernorm = norm_scale(bind, p + "input_layernorm.weight", h);
  w.post_attention_layernorm = norm_scale(bind, p + "post_attention_layernorm.weight", h);
  if (c.is_full_attention(layer)) {
    w.attention = bind_attention(c, bind, p + "self_attn.");
  } else {
    w.gdn = bind_gdn(c, bind, p + "linear_attn.");
  }
  if (c.is_moe()) {
    w.moe = bind_moe(c, bind, p + "mlp.");
    return w;
  }
  w.gate_proj = matrix(bind, p + "mlp.gate_proj.weight", c.intermediate_size, h);
  w.up_proj = matrix(bind, p + "mlp.up_proj.weight", c.intermediate_size, h);
  w.down_proj = matrix(bind, p + "mlp.down_proj.weight", h, c.intermediate_size);
  return w;
}

}  // namespace

std::vector<float> widened(const uint16_t* bf16, int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = bf16_to_f32(bf16[i]);
  return out;
}

std::vector<float> zero_centred_scale(const uint16_t* w, int64_t n) {
  std::vector<float> scale = widened(w, n);
  for (float& s : scale) s = 1.0f + s;
  return scale;
}

Qwen38Weights bind_qwen38_weights(const Qwen38Config& config, const Checkpoint& checkpoint) {
  Qwen38Weights weights;
  WeightBinder bind(checkpoint, kFamily, weights.owned);
  weights.prefix = find_prefix(checkpoint);
  const std::string& prefix = weights.prefix;
  weights.embed_tokens =
      matrix(bind, prefix + "embed_tokens.weight", config.vocab_size, config.hidden_size);
  for (int64_t i = 0; i < config.num_layers; ++i) {
    weights.layers.push_back(bind_layer(config, bind, fmt::format("{}layers.{}.", prefix, i), i));
  }
  weights.norm = norm_scale(bind, prefix + "norm.weight", config.hidden_size);
  // transformers ties lm_head to the embedding when the config says so, even if the file also
  // stores an lm_head.weight; follow it (the table is read in place, not copied).
  weights.lm_head = config.tie_word_embeddings
                        ? weights.embed_tokens
                        : matrix(bind, "lm_head.weight", config.vocab_size, config.hidden_size);
  return weights;
}

namespace {

// The q8 path reads Q4_0 / Q4_1 / Q8_0 rows regrouped by eight: a copy made once, here.
void pack_for_q8(kernels::WeightMatrix& m, Qwen38Weights& weights) {
  if (m.format != kernels::WeightFormat::kGguf || !kernels::gguf_q8_packs(m.gguf_type) ||
      m.packed != nullptr)
    return;
  weights.packed.push_back(
      std::make_unique<std::uint8_t[]>(kernels::gguf_q8_packed_bytes(m.gguf())));
  kernels::pack_gguf_q8_rows(m.gguf(), weights.packed.back().get());
  m.packed = weights.packed.back().get();
}

}  // namespace

namespace {

// All routed experts' bytes of one layer (0 for a dense layer).
std::size_t layer_expert_bytes(const kernels::ExpertMatrices& experts) {
  std::size_t total = 0;
  for (const auto* list : {&experts.gate, &experts.up, &experts.down}) {
    for (const kernels::WeightMatrix& m : *list) total += m.bytes(0, m.rows);
  }
  return total;
}

}  // namespace

std::size_t routed_expert_bytes(const Qwen38Weights& weights) {
  std::size_t total = 0;
  for (const Qwen38LayerWeights& l : weights.layers) total += layer_expert_bytes(l.moe.experts);
  return total;
}

std::size_t routed_expert_bytes_per_row(const Qwen38Weights& weights, int64_t experts_per_token) {
  std::size_t total = 0;
  for (const Qwen38LayerWeights& l : weights.layers) {
    const auto experts = static_cast<std::size_t>(l.moe.experts.count());
    if (experts == 0) continue;
    total +=
        layer_expert_bytes(l.moe.experts) / experts * static_cast<std::size_t>(experts_per_token);
  }
  return total;
}

std::size_t routed_expert_bytes_run(const Qwen38Weights& weights,
                                    const std::vector<int64_t>& experts_run) {
  std::size_t total = 0, moe_layer = 0;
  for (const Qwen38LayerWeights& l : weights.layers) {
    const auto experts = static_cast<std::size_t>(l.moe.experts.count());
    if (experts == 0) continue;
    total += layer_expert_bytes(l.moe.experts) / experts *
             static_cast<std::size_t>(experts_run.at(moe_layer++));
  }
  return total;
}

bool has_q8_matrices(const Qwen38Weights& weights) {
  bool any = false;
  for_each_multiplied_matrix(weights, [&](const kernels::WeightMatrix& m) {
    any =
        any || (m.format == kernels::WeightFormat::kGguf && kernels::gguf_q8_supports(m.gguf_type));
  });
  return any;
}

void set_matmul_inputs(Qwen38Weights& weights, kernels::MatmulInputs inputs) {
  // The embedding is only looked up (row_to_f32), never multiplied: tagged, not packed.
  weights.embed_tokens.inputs = inputs;
  for_each_multiplied_matrix(weights, [&](kernels::WeightMatrix& m) {
    m.inputs = inputs;
    if (inputs == kernels::MatmulInputs::kQ8) pack_for_q8(m, weights);
  });
}

}  // namespace md
