#include "models/kimi/kimi_reference.h"

#include <array>
#include <cmath>

#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/kda_rule.h"
#include "kernels/latent_attention.h"
#include "kernels/moe_routing.h"
#include "kernels/norms.h"
#include "kernels/residual_mix.h"
#include "kernels/situ.h"

namespace md {

namespace {

std::vector<float> product(const kernels::WeightMatrix& w, const float* x) {
  std::vector<float> y(static_cast<std::size_t>(w.rows));
  kernels::matmul(w, x, 1, y.data(), nullptr);
  return y;
}

// RMSk (§0): x · rsqrt(mean(x²) + eps) · w.
std::vector<float> rms(const float* x, const std::vector<float>& w, double eps) {
  std::vector<float> y(w.size());
  kernels::rms_norm(x, w.data(), static_cast<int64_t>(w.size()), static_cast<float>(eps), y.data());
  return y;
}

kernels::SituParams situ_params(const KimiK3Config& c) {
  return {static_cast<float>(c.situ_beta), static_cast<float>(c.situ_linear_beta)};
}

}  // namespace

KimiReference::KimiReference(const KimiK3Config& config, const KimiK3Weights& weights,
                             KimiAblation ablation)
    : config_(config), weights_(weights), ablation_(ablation) {
  const int64_t heads = config.num_attention_heads, nope = config.qk_nope_head_dim;
  const int64_t rank = config.kv_lora_rank, per_head = nope + config.v_head_dim;
  std::vector<float> row(static_cast<std::size_t>(rank));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (config.layer_kind(l) != KimiLayerKind::kMla) continue;
    const kernels::WeightMatrix& kv_b = weights.layers[l].mla.kv_b_proj;
    std::vector<std::vector<float>> per_layer(static_cast<std::size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
      per_layer[h].resize(static_cast<std::size_t>(rank * nope));
      for (int64_t i = 0; i < nope; ++i) {
        (void)kernels::row_to_f32(kv_b, h * per_head + i, row.data());
        for (int64_t r = 0; r < rank; ++r) per_layer[h][r * nope + i] = row[r];
      }
    }
    key_absorb_.push_back(std::move(per_layer));
  }
}

KimiSequenceState KimiReference::new_state() const {
  KimiSequenceState s;
  const int64_t channels = config_.kda_channels(), d = config_.kda_head_dim;
  for (int64_t i = 0; i < config_.num_kda_layers(); ++i) {
    s.conv_history.emplace_back(3 * (config_.short_conv_kernel - 1) * channels, 0.0f);
    s.delta_state.emplace_back(config_.kda_num_heads * d * d, 0.0f);
  }
  s.latent_cache.resize(static_cast<std::size_t>(config_.num_mla_layers()));
  return s;
}

void KimiReference::mix(const std::vector<const float*>& blocks, const float* prefix,
                        const float* w, float* out) const {
  const int64_t h = config_.hidden_size;
  if (ablation_ == KimiAblation::kNoResidualMix) {
    std::copy(prefix, prefix + h, out);
    return;
  }
  std::vector<const float*> candidates = blocks;
  candidates.push_back(prefix);
  std::vector<float> scores(candidates.size());
  kernels::residual_mix(candidates.data(), static_cast<int64_t>(candidates.size()), w, h,
                        static_cast<float>(config_.rms_norm_eps), scores.data(), out);
}

// §6.2: projections, the lower-bound decay, the short convs (SiLU) with their history shifted,
// then per head L2-normalised q (scaled) and k, the delta rule, and the gated output norm.
void KimiReference::kda(int64_t layer, const float* x, KimiSequenceState& state, float* out) const {
  const KimiKdaWeights& w = weights_.layers[layer].kda;
  const int64_t slot = config_.kda_slot(layer), channels = config_.kda_channels();
  const int64_t d = config_.kda_head_dim, heads = config_.kda_num_heads;
  const int64_t taps = config_.short_conv_kernel;
  const std::array<std::vector<float>, 3> raw = {product(w.q_proj, x), product(w.k_proj, x),
                                                 product(w.v_proj, x)};
  const std::vector<float> fa = product(w.f_a_proj, x);
  const std::vector<float> f = product(w.f_b_proj, fa.data());
  const std::vector<float> beta_logits = product(w.b_proj, x);
  std::vector<float> gate = product(weights_.layers[layer].g_proj, x);
  std::array<std::vector<float>, 3> conv;
  float* history = state.conv_history[slot].data();
  const std::array<const std::vector<float>*, 3> weights = {&w.q_conv, &w.k_conv, &w.v_conv};
  for (int i = 0; i < 3; ++i) {
    float* hist = history + i * (taps - 1) * channels;  // [K − 1][C], oldest first
    conv[i].resize(static_cast<std::size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      const float* tap = weights[i]->data() + c * taps;
      float y = 0;
      for (int64_t t = 0; t < taps - 1; ++t) y += tap[t] * hist[t * channels + c];
      y += tap[taps - 1] * raw[i][c];
      conv[i][c] = kernels::silu(y);
    }
    for (int64_t t = 0; t + 1 < taps - 1; ++t) {
      std::copy(hist + (t + 1) * channels, hist + (t + 2) * channels, hist + t * channels);
    }
    std::copy(raw[i].begin(), raw[i].end(), hist + (taps - 2) * channels);
  }
  std::vector<float> y(static_cast<std::size_t>(channels)), decay(static_cast<std::size_t>(d));
  const auto lower_bound = static_cast<float>(config_.gate_lower_bound);
  for (int64_t h = 0; h < heads; ++h) {
    float* q = conv[0].data() + h * d;
    float* k = conv[1].data() + h * d;
    kernels::l2_normalize(q, d, kernels::kDeltaNetL2Eps, 1.0f / std::sqrt(static_cast<float>(d)));
    kernels::l2_normalize(k, d, kernels::kDeltaNetL2Eps, 1.0f);
    for (int64_t i = 0; i < d; ++i) {
      const int64_t c = h * d + i;
      decay[i] =
          std::exp(kernels::kda_lower_bound_gate(w.exp_a_log[h], f[c], w.dt_bias[c], lower_bound));
    }
    float* o = y.data() + h * d;
    kernels::kda_step(state.delta_state[slot].data() + h * d * d, d, d, q, k,
                      conv[2].data() + h * d, kernels::sigmoid(beta_logits[h]), decay.data(), o);
    // Output norm (eps 1e-5, the plain weight) and the sigmoid gate.
    float squares = 0;
    for (int64_t j = 0; j < d; ++j) squares += o[j] * o[j];
    const float r = 1.0f / std::sqrt(squares / static_cast<float>(d) + 1e-5f);
    for (int64_t j = 0; j < d; ++j)
      o[j] = o[j] * r * w.o_norm[j] * kernels::sigmoid(gate[h * d + j]);
  }
  kernels::matmul(weights_.layers[layer].o_proj, y.data(), 1, out, nullptr);
}

// §7 in the absorbed form (§7.3): the query and latent paths, the latent and shared key cached
// at this position, attention over the cache through W_UK_hᵀ and W_UV_h, the sigmoid output gate.
void KimiReference::mla(int64_t layer, const float* x, KimiSequenceState& state, float* out) const {
  const KimiMlaWeights& w = weights_.layers[layer].mla;
  const int64_t slot = config_.mla_slot(layer), heads = config_.num_attention_heads;
  const int64_t nope = config_.qk_nope_head_dim, shared = config_.qk_rope_head_dim;
  const int64_t rank = config_.kv_lora_rank, v = config_.v_head_dim, qk = nope + shared;
  const double eps = config_.rms_norm_eps;
  const std::vector<float> cq = rms(product(w.q_a_proj, x).data(), w.q_a_norm, eps);
  const std::vector<float> q = product(w.q_b_proj, cq.data());
  const std::vector<float> ckv = product(w.kv_a_proj, x);
  const std::vector<float> latent = rms(ckv.data(), w.kv_a_norm, eps);
  std::vector<float>& cache = state.latent_cache[slot];
  cache.insert(cache.end(), latent.begin(), latent.end());
  cache.insert(cache.end(), ckv.begin() + rank, ckv.end());
  const int64_t positions = static_cast<int64_t>(cache.size()) / (rank + shared);
  std::vector<float> q_latent(heads * rank), q_shared(heads * shared), context(heads * rank);
  for (int64_t h = 0; h < heads; ++h) {
    kernels::matmul(kernels::f32_weight_matrix(key_absorb_[slot][h].data(), rank, nope),
                    q.data() + h * qk, 1, &q_latent[h * rank], nullptr);
    std::copy(q.begin() + h * qk + nope, q.begin() + (h + 1) * qk, q_shared.begin() + h * shared);
  }
  std::vector<float> scores(static_cast<std::size_t>(positions));
  const kernels::LatentCache view{cache.data(), rank + shared, cache.data() + rank, rank + shared,
                                  positions};
  kernels::latent_attention(q_latent.data(), q_shared.data(), heads, rank, shared, view,
                            1.0f / std::sqrt(static_cast<float>(qk)), scores.data(),
                            context.data());
  const std::vector<float> gate = product(weights_.layers[layer].g_proj, x);
  std::vector<float> expanded(static_cast<std::size_t>(w.kv_b_proj.rows)), y(heads * v);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t first = h * (nope + v) + nope;  // W_UV_h: the head's value rows
    kernels::weight_tile(w.kv_b_proj, first, first + v, &context[h * rank], rank, 1,
                         {expanded.data(), 0, false});
    for (int64_t j = 0; j < v; ++j) {
      y[h * v + j] = expanded[first + j] * kernels::sigmoid(gate[h * v + j]);
    }
  }
  kernels::matmul(weights_.layers[layer].o_proj, y.data(), 1, out, nullptr);
}

// §8: the dense SiTU MLP of the first layers, else the latent MoE (corrected sigmoid router,
// MXFP4 experts mixed in selection order, the latent norm and up-projection) plus the shared
// experts.
void KimiReference::ffn(int64_t layer, const float* x, float* out) const {
  const KimiLayerWeights& lw = weights_.layers[layer];
  const kernels::SituParams situ = situ_params(config_);
  auto situ_mlp = [&](const kernels::WeightMatrix& gate, const kernels::WeightMatrix& up,
                      const kernels::WeightMatrix& down, float* y) {
    std::vector<float> g = product(gate, x);
    const std::vector<float> u = product(up, x);
    kernels::situ_rows(g.data(), u.data(), static_cast<int64_t>(g.size()), situ, g.data());
    kernels::matmul(down, g.data(), 1, y, nullptr);
  };
  if (!config_.is_moe_layer(layer)) {
    situ_mlp(lw.dense_gate, lw.dense_up, lw.dense_down, out);
    return;
  }
  const KimiMoeWeights& w = lw.moe;
  const int64_t experts = config_.num_experts, k = config_.num_experts_per_token;
  const int64_t h = config_.hidden_size;
  const std::vector<float> logits = product(w.router, x);
  const std::vector<float> zero(static_cast<std::size_t>(experts), 0.0f);
  const float* bias =
      ablation_ == KimiAblation::kNoCorrectionBias ? zero.data() : w.router_bias.data();
  std::vector<float> scratch(static_cast<std::size_t>(3 * experts));
  std::array<kernels::ExpertChoice, kernels::kMaxExpertsPerToken> choices{};
  kernels::route_sigmoid_bias_top_k(logits.data(), bias, experts, k, 1.0f, 0.0f, scratch.data(),
                                    choices.data());
  const std::vector<float> latent = product(w.latent_down, x);
  std::vector<float> acc(latent.size(), 0.0f);
  for (int64_t slot = 0; slot < k; ++slot) {
    const kernels::ExpertChoice& choice = choices[slot];
    std::vector<float> g = product(w.experts.gate[choice.expert], latent.data());
    const std::vector<float> u = product(w.experts.up[choice.expert], latent.data());
    kernels::situ_rows(g.data(), u.data(), static_cast<int64_t>(g.size()), situ, g.data());
    const std::vector<float> o = product(w.experts.down[choice.expert], g.data());
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += o[i] * choice.weight;
  }
  const std::vector<float> normed = rms(acc.data(), w.latent_norm, config_.rms_norm_eps);
  kernels::matmul(w.latent_up, normed.data(), 1, out, nullptr);
  if (config_.num_shared_experts > 0) {
    std::vector<float> shared(static_cast<std::size_t>(h));
    situ_mlp(w.shared_gate, w.shared_up, w.shared_down, shared.data());
    for (int64_t i = 0; i < h; ++i) out[i] += shared[i];
  }
}

// §5.2's per-token timeline.
void KimiReference::step(int32_t token, KimiSequenceState& state, float* logits) const {
  const int64_t h = config_.hidden_size, block = config_.attn_res_block_size;
  const double eps = config_.rms_norm_eps;
  std::vector<std::vector<float>> stored;  // the pushed blocks
  stored.reserve(static_cast<std::size_t>(config_.num_residual_blocks()));
  std::vector<float> prefix(static_cast<std::size_t>(h)), mixed(prefix.size()), sub(prefix.size());
  if (!kernels::row_to_f32(weights_.embed_tokens, token, prefix.data())) {
    fail("the embedding's format cannot be read");
  }
  auto blocks = [&] {
    std::vector<const float*> b;
    for (const auto& s : stored) b.push_back(s.data());
    return b;
  };
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const KimiLayerWeights& w = weights_.layers[l];
    mix(blocks(), prefix.data(), w.attention_mix.data(), mixed.data());
    const bool fresh = kernels::pushes_block(l, block);
    if (fresh) stored.push_back(prefix);
    const std::vector<float> x = rms(mixed.data(), w.input_norm, eps);
    if (config_.layer_kind(l) == KimiLayerKind::kKda) {
      kda(l, x.data(), state, sub.data());
    } else {
      mla(l, x.data(), state, sub.data());
    }
    for (int64_t i = 0; i < h; ++i) prefix[i] = fresh ? sub[i] : prefix[i] + sub[i];
    mix(blocks(), prefix.data(), w.mlp_mix.data(), mixed.data());
    const std::vector<float> m = rms(mixed.data(), w.post_attention_norm, eps);
    ffn(l, m.data(), sub.data());
    for (int64_t i = 0; i < h; ++i) prefix[i] += sub[i];
  }
  mix(blocks(), prefix.data(), weights_.output_mix.data(), mixed.data());
  const std::vector<float> final_hidden = rms(mixed.data(), weights_.final_norm, eps);
  kernels::matmul(weights_.lm_head, final_hidden.data(), 1, logits, nullptr);
  ++state.position;
}

}  // namespace md
