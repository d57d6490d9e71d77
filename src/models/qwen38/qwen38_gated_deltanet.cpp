// Gated DeltaNet mixer (spec §5, §8.2, §8.3), f32 activations.
#include <cmath>
#include <vector>

#include "base/cache_aligned.h"
#include "kernels/activations.h"
#include "kernels/causal_conv.h"
#include "kernels/gated_delta_rule.h"
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

// Which key head value head j reads: consecutive repetition (j / group), not tiling.
// The key head a value head pairs with, in the checkpoint's order (the ablation swaps the orders).
int64_t key_head_of(const Qwen38Config& c, const Qwen38Options& o, int64_t value_head) {
  const bool tiled = c.value_heads_tiled != (o.ablation == testing::Qwen38Ablation::kTiledKeyHeads);
  return tiled ? value_head % c.linear_num_key_heads : value_head / c.linear_head_group();
}

void normalise_queries_and_keys(const Qwen38Config& c, float* mixed, int64_t rows) {
  int64_t dk = c.linear_key_head_dim;
  for (int64_t t = 0; t < rows; ++t) {
    float* row = mixed + t * c.conv_dim();
    for (int64_t head = 0; head < c.linear_num_key_heads; ++head) {
      kernels::delta_net_query_key(row + head * dk, row + c.key_dim() + head * dk, dk);
    }
  }
}

// β = σ(b) and g = −exp(A_log) · softplus(a + dt_bias), laid out [value head][row].
void decay_and_write_strength(const Qwen38Config& c, const Qwen38GdnWeights& w, const Buffer& b,
                              const Buffer& a, int64_t rows, Buffer& beta, Buffer& g) {
  int64_t heads = c.linear_num_value_heads;
  for (int64_t j = 0; j < heads; ++j) {
    for (int64_t t = 0; t < rows; ++t) {
      auto at = static_cast<std::size_t>(t * heads + j);
      auto out = static_cast<std::size_t>(j * rows + t);
      kernels::delta_net_gates(w.decay_factor[static_cast<std::size_t>(j)],
                               w.dt_bias[static_cast<std::size_t>(j)], b[at], a[at], beta[out],
                               g[out]);
    }
  }
}

}  // namespace

void gated_deltanet_forward(const Qwen38LayerContext& ctx, const Qwen38GdnWeights& w,
                            Qwen38GdnState& state, const float* x, int64_t rows, float* out) {
  const Qwen38Config& c = ctx.config;
  int64_t heads = c.linear_num_value_heads;
  int64_t dk = c.linear_key_head_dim;
  int64_t dv = c.linear_value_head_dim;

  Buffer projected = buffer(rows * c.conv_dim());
  Buffer z = buffer(rows * c.value_dim());
  Buffer b = buffer(rows * heads);
  Buffer a = buffer(rows * heads);
  kernels::matmul(w.in_proj_qkv, x, rows, projected.data(), ctx.pool);
  kernels::matmul(w.in_proj_z, x, rows, z.data(), ctx.pool);
  kernels::matmul(w.in_proj_b, x, rows, b.data(), ctx.pool);
  kernels::matmul(w.in_proj_a, x, rows, a.data(), ctx.pool);

  Buffer mixed = buffer(rows * c.conv_dim());
  const kernels::Activation act = testing::reference_activation(c.hidden_act, ctx.options.ablation);
  if (ctx.options.ablation == testing::Qwen38Ablation::kSkipConv) {
    mixed = projected;
    kernels::activate_all(act, mixed.data(), static_cast<int64_t>(mixed.size()));
  } else {
    kernels::causal_conv(state.conv.data(), w.conv1d.data(), c.conv_dim(), c.linear_conv_kernel,
                         projected.data(), rows, mixed.data(), act);
  }
  normalise_queries_and_keys(c, mixed.data(), rows);

  Buffer beta = buffer(heads * rows);
  Buffer g = buffer(heads * rows);
  decay_and_write_strength(c, w, b, a, rows, beta, g);

  Buffer core = buffer(rows * c.value_dim());
  bool chunked = ctx.options.chunked_delta_rule && rows > 1;
  auto run_heads = [&](int64_t first, int64_t last) {
    for (int64_t j = first; j < last; ++j) {
      int64_t kh = key_head_of(c, ctx.options, j);
      kernels::DeltaRuleRows in;
      in.q = mixed.data() + kh * dk;
      in.k = mixed.data() + c.key_dim() + kh * dk;
      in.v = mixed.data() + 2 * c.key_dim() + j * dv;
      in.qk_stride = c.conv_dim();
      in.v_stride = c.conv_dim();
      in.beta = beta.data() + j * rows;
      in.g = g.data() + j * rows;
      in.rows = rows;
      float* s = state.recurrent.data() + j * dv * dk;
      float* o = core.data() + j * dv;
      if (chunked) {
        kernels::gated_delta_chunked(s, dv, dk, in, o, c.value_dim(), ctx.options.delta_rule_chunk);
      } else {
        kernels::gated_delta_recurrent(s, dv, dk, in, o, c.value_dim());
      }
    }
  };
  if (ctx.pool != nullptr) {
    // The recurrence touches each head's dv × dk state a few times per row.
    ctx.pool->parallel_for_work(heads, 4 * heads * dv * dk * rows, run_heads);
  } else {
    run_heads(0, heads);
  }

  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < heads; ++j) {
      float* o = core.data() + t * c.value_dim() + j * dv;
      kernels::gated_rms_norm(o, z.data() + t * c.value_dim() + j * dv, w.norm.data(), dv,
                              static_cast<float>(c.rms_norm_eps), o);
    }
  }
  kernels::matmul(w.out_proj, core.data(), rows, out, ctx.pool);
}

}  // namespace md
