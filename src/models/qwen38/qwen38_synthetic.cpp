#include "models/qwen38/qwen38_synthetic.h"

#include <cmath>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/gated_delta_rule.h"
#include "models/common/synthetic_weights.h"

namespace md {

namespace {

Qwen38Config base_config(int64_t hidden, int64_t layers, int64_t vocab) {
  Qwen38Config c;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.vocab_size = vocab;
  c.linear_conv_kernel = 4;
  c.partial_rotary_factor = 0.25;
  c.rope_theta = 1e7;
  c.rms_norm_eps = 1e-6;
  for (int64_t i = 0; i < layers; ++i) {
    c.layer_types.push_back((i + 1) % 4 == 0 ? Qwen38LayerKind::kFullAttention
                                             : Qwen38LayerKind::kLinearAttention);
  }
  return c;
}

kernels::WeightMatrix matrix(SyntheticWeights& arena, int64_t rows, int64_t cols) {
  return kernels::WeightMatrix::of(arena.matrix(rows, cols));
}

Qwen38Weights synthetic_weights(const Qwen38Config& c, ThreadPool& pool) {
  Qwen38Weights w;
  SyntheticWeights arena(w.owned, pool);
  int64_t h = c.hidden_size;
  w.embed_tokens = kernels::WeightMatrix::of(
      kernels::Bf16Matrix{arena.tensor(c.vocab_size * h, 1.0f), c.vocab_size, h});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Qwen38LayerWeights l;
    l.input_layernorm = arena.centred_scale(h, 0.05f);
    l.post_attention_layernorm = arena.centred_scale(h, 0.05f);
    if (c.is_full_attention(i)) {
      l.attention.q_proj = matrix(arena, c.q_proj_dim(), h);
      l.attention.k_proj = matrix(arena, c.kv_dim(), h);
      l.attention.v_proj = matrix(arena, c.kv_dim(), h);
      l.attention.o_proj = matrix(arena, h, c.attn_output_dim());
      l.attention.q_norm = arena.centred_scale(c.head_dim, 0.05f);
      l.attention.k_norm = arena.centred_scale(c.head_dim, 0.05f);
    } else {
      Qwen38GdnWeights& g = l.gdn;
      g.in_proj_qkv = matrix(arena, c.conv_dim(), h);
      g.in_proj_z = matrix(arena, c.value_dim(), h);
      g.in_proj_b = matrix(arena, c.linear_num_value_heads, h);
      g.in_proj_a = matrix(arena, c.linear_num_value_heads, h);
      g.conv1d = arena.values(c.conv_dim() * c.linear_conv_kernel, 0.5f);
      for (int64_t j = 0; j < c.linear_num_value_heads; ++j) {
        g.decay_factor.push_back(
            kernels::delta_net_decay_factor(std::log(1.0f + static_cast<float>(j % 16))));
        g.dt_bias.push_back(1.0f);
      }
      g.norm = arena.values(c.linear_value_head_dim, 1.0f);
      g.out_proj = matrix(arena, h, c.value_dim());
    }
    l.gate_proj = matrix(arena, c.intermediate_size, h);
    l.up_proj = matrix(arena, c.intermediate_size, h);
    l.down_proj = matrix(arena, h, c.intermediate_size);
    w.layers.push_back(std::move(l));
  }
  w.norm = arena.centred_scale(h, 0.05f);
  w.lm_head = matrix(arena, c.vocab_size, h);
  w.prefix = "synthetic.";
  return w;
}

}  // namespace

std::vector<std::string> synthetic_qwen38_shapes() {
  return {"qwen38-0.8b", "qwen38-tiny"};
}

Qwen38Config synthetic_qwen38_config(const std::string& shape) {
  if (shape == "qwen38-0.8b") {
    Qwen38Config c = base_config(1024, 24, 248320);
    c.intermediate_size = 3584;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.head_dim = 256;
    c.linear_num_key_heads = 16;
    c.linear_num_value_heads = 16;
    c.linear_key_head_dim = 128;
    c.linear_value_head_dim = 128;
    c.max_position_embeddings = 262144;
    c.eos_token_ids = {248044, 248046};
    return c;
  }
  if (shape == "qwen38-tiny") {
    Qwen38Config c = base_config(128, 8, 512);
    c.intermediate_size = 320;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 64;
    c.linear_num_key_heads = 2;
    c.linear_num_value_heads = 6;
    c.linear_key_head_dim = 32;
    c.linear_value_head_dim = 16;
    c.max_position_embeddings = 4096;
    c.eos_token_ids = {510, 511};
    return c;
  }
  fail("unknown synthetic shape '{}' (known: qwen38-0.8b, qwen38-tiny)", shape);
}

std::unique_ptr<Qwen38Model> make_synthetic_qwen38(const std::string& shape,
                                                   const ModelRunOptions& options) {
  Qwen38Config config = synthetic_qwen38_config(shape);
  ThreadPool pool(options.threads);
  Qwen38Weights weights = synthetic_weights(config, pool);
  return std::make_unique<Qwen38Model>("synthetic " + shape, std::move(config), std::move(weights),
                                       options);
}

std::unique_ptr<Qwen38Model> make_synthetic_qwen38(Qwen38Config config,
                                                   const ModelRunOptions& options) {
  ThreadPool pool(options.threads);
  Qwen38Weights weights = synthetic_weights(config, pool);
  return std::make_unique<Qwen38Model>("synthetic", std::move(config), std::move(weights), options);
}

}  // namespace md
