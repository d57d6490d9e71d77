#include "models/qwen38/qwen38_gguf_weights.h"

#include <fmt/format.h>

#include "models/common/gguf_binder.h"

namespace md {

namespace {

constexpr char kFamily[] = "qwen35";

struct Binder {
  const GgufFile& file;

  kernels::WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
    return kernels::WeightMatrix::of(bind_gguf_matrix(file, name, rows, cols, kFamily));
  }
  std::vector<float> vector(const std::string& name, int64_t n) const {
    return bind_gguf_vector(file, name, n, kFamily);
  }
  std::vector<kernels::WeightMatrix> stack(const std::string& name, int64_t count, int64_t rows,
                                           int64_t cols) const {
    std::vector<kernels::WeightMatrix> matrices;
    for (const kernels::GgufMatrix& m : bind_gguf_stack(file, name, count, rows, cols, kFamily))
      matrices.push_back(kernels::WeightMatrix::of(m));
    return matrices;
  }
};

// The routed experts: ffn_gate_exps and ffn_up_exps [experts][I][H] as the converter writes
// them, or one ffn_gate_up_exps [experts][2I][H] with each expert's gate rows before its up
// rows; ffn_down_exps [experts][H][I].
kernels::ExpertMatrices bind_experts(const Qwen38Moe& m, int64_t h, const Binder& bind,
                                     const std::string& p) {
  kernels::ExpertMatrices experts;
  const int64_t i = m.intermediate;
  if (bind.file.tensor(p + "ffn_gate_up_exps.weight") != nullptr) {
    for (const kernels::WeightMatrix& both :
         bind.stack(p + "ffn_gate_up_exps.weight", m.experts, 2 * i, h)) {
      kernels::WeightMatrix gate = both, up = both;
      gate.rows = up.rows = i;
      up.data = both.row(i);
      experts.gate.push_back(gate);
      experts.up.push_back(up);
    }
  } else {
    experts.gate = bind.stack(p + "ffn_gate_exps.weight", m.experts, i, h);
    experts.up = bind.stack(p + "ffn_up_exps.weight", m.experts, i, h);
  }
  experts.down = bind.stack(p + "ffn_down_exps.weight", m.experts, h, i);
  return experts;
}

Qwen38MoeWeights bind_moe(const Qwen38Config& c, const Binder& bind, const std::string& p) {
  const int64_t h = c.hidden_size, shared = c.moe.shared_intermediate;
  Qwen38MoeWeights w;
  w.router = bind.matrix(p + "ffn_gate_inp.weight", c.moe.experts, h);
  w.experts = bind_experts(c.moe, h, bind, p);
  w.shared_gate_proj = bind.matrix(p + "ffn_gate_shexp.weight", shared, h);
  w.shared_up_proj = bind.matrix(p + "ffn_up_shexp.weight", shared, h);
  w.shared_down_proj = bind.matrix(p + "ffn_down_shexp.weight", h, shared);
  w.shared_expert_gate = bind.matrix(p + "ffn_gate_inp_shexp.weight", 1, h);
  return w;
}

Qwen38GdnWeights bind_gdn(const Qwen38Config& c, const Binder& bind, const std::string& p) {
  const int64_t h = c.hidden_size, heads = c.linear_num_value_heads;
  Qwen38GdnWeights w;
  w.in_proj_qkv = bind.matrix(p + "attn_qkv.weight", c.conv_dim(), h);
  w.in_proj_z = bind.matrix(p + "attn_gate.weight", c.value_dim(), h);
  w.in_proj_b = bind.matrix(p + "ssm_beta.weight", heads, h);
  w.in_proj_a = bind.matrix(p + "ssm_alpha.weight", heads, h);
  w.conv1d = bind_gguf_table(bind.file, p + "ssm_conv1d.weight", c.conv_dim(), c.linear_conv_kernel,
                             kFamily);
  w.decay_factor = bind.vector(p + "ssm_a", heads);  // −exp(A_log), the converter's form
  w.dt_bias = bind.vector(p + "ssm_dt.bias", heads);
  w.norm = bind.vector(p + "ssm_norm.weight", c.linear_value_head_dim);
  w.out_proj = bind.matrix(p + "ssm_out.weight", h, c.value_dim());
  return w;
}

Qwen38AttentionWeights bind_attention(const Qwen38Config& c, const Binder& bind,
                                      const std::string& p) {
  const int64_t h = c.hidden_size;
  Qwen38AttentionWeights w;
  // attn_q keeps transformers' rows: per head, its query rows then its gate rows.
  w.q_proj = bind.matrix(p + "attn_q.weight", c.q_proj_dim(), h);
  w.k_proj = bind.matrix(p + "attn_k.weight", c.kv_dim(), h);
  w.v_proj = bind.matrix(p + "attn_v.weight", c.kv_dim(), h);
  w.o_proj = bind.matrix(p + "attn_output.weight", h, c.attn_output_dim());
  w.q_norm = bind.vector(p + "attn_q_norm.weight", c.head_dim);
  w.k_norm = bind.vector(p + "attn_k_norm.weight", c.head_dim);
  return w;
}

}  // namespace

Qwen38Weights bind_qwen38_gguf_weights(std::shared_ptr<const GgufFile> file,
                                       const Qwen38Config& c) {
  const Binder bind{*file};
  const int64_t h = c.hidden_size;
  Qwen38Weights w;
  w.prefix = "blk.";
  w.embed_tokens = bind.matrix("token_embd.weight", c.vocab_size, h);
  w.lm_head =
      c.tie_word_embeddings ? w.embed_tokens : bind.matrix("output.weight", c.vocab_size, h);
  w.norm = bind.vector("output_norm.weight", h);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    Qwen38LayerWeights l;
    l.input_layernorm = bind.vector(p + "attn_norm.weight", h);
    l.post_attention_layernorm = bind.vector(p + "post_attention_norm.weight", h);
    if (c.is_full_attention(i)) {
      l.attention = bind_attention(c, bind, p);
    } else {
      l.gdn = bind_gdn(c, bind, p);
    }
    if (c.is_moe()) {
      l.moe = bind_moe(c, bind, p);
    } else {
      l.gate_proj = bind.matrix(p + "ffn_gate.weight", c.intermediate_size, h);
      l.up_proj = bind.matrix(p + "ffn_up.weight", c.intermediate_size, h);
      l.down_proj = bind.matrix(p + "ffn_down.weight", h, c.intermediate_size);
    }
    w.layers.push_back(std::move(l));
  }
  w.storage = std::move(file);
  return w;
}

}  // namespace md
