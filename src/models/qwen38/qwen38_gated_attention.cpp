// Gated GQA attention mixer (spec §6, §8.1), f32 activations, bf16 or f32 KV cache.
#include <cmath>
#include <vector>

#include "base/cache_aligned.h"
#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/kv_attention.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/qwen38/qwen38_head_math.h"
#include "models/qwen38/qwen38_layers.h"
#include "models/qwen38/qwen38_testing.h"

namespace md {

namespace {

// Cache-line aligned: the matrix tiles load 64 bytes at a time (base/cache_aligned.h).
using Buffer = CacheAligned<float>;
Buffer buffer(int64_t n) {
  return Buffer(static_cast<std::size_t>(n));
}

// Norms and RoPE on every query and key head of every row, then the K/V cache writes.
void prepare_rows(const Qwen38LayerContext& ctx, const Qwen38AttentionWeights& w,
                  kernels::KvCache& cache, int64_t first_position, Buffer& qg, Buffer& k,
                  const Buffer& v, int64_t rows) {
  const Qwen38Config& c = ctx.config;
  int64_t hd = c.head_dim;
  auto eps = static_cast<float>(c.rms_norm_eps);
  Buffer cos_values = buffer(c.rotary_dim() / 2);
  Buffer sin_values = buffer(c.rotary_dim() / 2);
  for (int64_t t = 0; t < rows; ++t) {
    int64_t position = first_position + t;
    ctx.rope.angles(position, cos_values.data(), sin_values.data());
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      float* q = qg.data() + t * c.q_proj_dim() + h * 2 * hd;
      qwen38::normalise_and_rotate(q, w.q_norm, hd, eps, ctx.rope, cos_values.data(),
                                   sin_values.data());
    }
    for (int64_t kv = 0; kv < c.num_key_value_heads; ++kv) {
      float* key = k.data() + t * c.kv_dim() + kv * hd;
      qwen38::normalise_and_rotate(key, w.k_norm, hd, eps, ctx.rope, cos_values.data(),
                                   sin_values.data());
      cache.write(kv, position, key, v.data() + t * c.kv_dim() + kv * hd);
    }
  }
}

// Each row of `x` (rows of bias.size()) plus the bias, when there is one.
void add_bias(Buffer& x, const std::vector<float>& bias, int64_t rows) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < rows; ++t) {
    for (std::size_t r = 0; r < bias.size(); ++r)
      x[static_cast<std::size_t>(t) * bias.size() + r] += bias[r];
  }
}

}  // namespace

void gated_attention_forward(const Qwen38LayerContext& ctx, const Qwen38AttentionWeights& w,
                             kernels::KvCache& cache, int64_t first_position, const float* x,
                             int64_t rows, float* out) {
  const Qwen38Config& c = ctx.config;
  int64_t hd = c.head_dim;
  Buffer qg = buffer(rows * c.q_proj_dim());
  Buffer k = buffer(rows * c.kv_dim());
  Buffer v = buffer(rows * c.kv_dim());
  kernels::matmul(w.q_proj, x, rows, qg.data(), ctx.pool);
  kernels::matmul(w.k_proj, x, rows, k.data(), ctx.pool);
  kernels::matmul(w.v_proj, x, rows, v.data(), ctx.pool);
  if (ctx.options.ablation != testing::Qwen38Ablation::kSkipAttentionBias) {
    add_bias(qg, w.q_bias, rows);
    add_bias(k, w.k_bias, rows);
    add_bias(v, w.v_bias, rows);
  }
  prepare_rows(ctx, w, cache, first_position, qg, k, v, rows);

  Buffer attended = buffer(rows * c.attn_output_dim());
  std::vector<kernels::AttentionRow> attending;
  for (int64_t t = 0; t < rows; ++t) attending.push_back({&cache, first_position + t + 1});
  kernels::attend_rows({.heads = c.num_attention_heads,
                        .kv_heads = c.num_key_value_heads,
                        .head_dim = hd,
                        .scale = 1.0f / std::sqrt(static_cast<float>(hd)),
                        .q = qg.data(),
                        .q_row_stride = c.q_proj_dim(),
                        .q_head_stride = 2 * hd,
                        .out = attended.data(),
                        .out_row_stride = c.attn_output_dim()},
                       attending, ctx.pool);
  if (ctx.options.ablation != testing::Qwen38Ablation::kSkipAttentionGate) {
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t h = 0; h < c.num_attention_heads; ++h) {
        const float* gate = qg.data() + t * c.q_proj_dim() + h * 2 * hd + hd;
        qwen38::apply_output_gate(attended.data() + t * c.attn_output_dim() + h * hd, gate, hd);
      }
    }
  }
  kernels::matmul(w.o_proj, attended.data(), rows, out, ctx.pool);
}

}  // namespace md
