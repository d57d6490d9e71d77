#include "models/kimi/kimi_reference.h"

#include <array>
#include <cmath>
#include <map>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/attention_runs.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/kda_rule.h"
#include "kernels/latent_attention.h"
#include "kernels/moe_routing.h"
#include "kernels/norms.h"
#include "kernels/residual_mix.h"
#include "kernels/situ.h"

namespace md {

namespace {

std::vector<float> product(const kernels::WeightMatrix& w, const float* x, ThreadPool* pool) {
  std::vector<float> y(static_cast<std::size_t>(w.rows));
  kernels::matmul(w, x, 1, y.data(), pool);
  return y;
}

// W · x for `n` rows of x: [n][W.rows].
std::vector<float> rows_product(const kernels::WeightMatrix& w, const float* x, int64_t n,
                                ThreadPool* pool) {
  std::vector<float> y(static_cast<std::size_t>(n * w.rows));
  kernels::matmul(w, x, n, y.data(), pool);
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
                             KimiReferenceOptions options, ThreadPool* pool)
    : config_(config), weights_(weights), options_(options), pool_(pool) {
  const int64_t heads = config.num_attention_heads, nope = config.qk_nope_head_dim;
  const int64_t rank = config.kv_lora_rank, per_head = nope + config.v_head_dim;
  std::vector<float> row(static_cast<std::size_t>(rank));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (config.layer_kind(l) != KimiLayerKind::kMla) continue;
    const kernels::WeightMatrix& kv_b = weights.layers[l].mla.kv_b_proj;
    std::vector<float> per_layer(static_cast<std::size_t>(heads * rank * nope));
    for (int64_t h = 0; h < heads; ++h) {
      float* head = per_layer.data() + h * rank * nope;
      for (int64_t i = 0; i < nope; ++i) {
        (void)kernels::row_to_f32(kv_b, h * per_head + i, row.data());
        for (int64_t r = 0; r < rank; ++r) head[r * nope + i] = row[r];
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
  s.latent_cache_bf16.resize(static_cast<std::size_t>(config_.num_mla_layers()));
  s.kv_cache.resize(static_cast<std::size_t>(config_.num_mla_layers()));
  return s;
}

void KimiReference::mix(const std::vector<const float*>& blocks, const float* prefix,
                        const float* w, float* out) const {
  const int64_t h = config_.hidden_size;
  if (options_.ablation == KimiAblation::kNoResidualMix) {
    std::copy(prefix, prefix + h, out);
    return;
  }
  std::vector<const float*> candidates = blocks;
  candidates.push_back(prefix);
  std::vector<float> scores(candidates.size());
  kernels::residual_mix(candidates.data(), static_cast<int64_t>(candidates.size()), w, h,
                        static_cast<float>(config_.rms_norm_eps), scores.data(), out);
}

// §6.2 for `n` consecutive tokens: projections, the lower-bound decay, the short convs (SiLU)
// with their history shifted token by token, per head L2-normalised q (scaled) and k, the delta
// rule (token by token, or chunked as §6.3 allows for a prompt), and the gated output norm.
void KimiReference::kda(int64_t layer, const float* x, int64_t n, KimiSequenceState& state,
                        float* out, bool chunked) const {
  const KimiKdaWeights& w = weights_.layers[layer].kda;
  const int64_t slot = config_.kda_slot(layer), channels = config_.kda_channels();
  const int64_t d = config_.kda_head_dim, heads = config_.kda_num_heads;
  const int64_t taps = config_.short_conv_kernel;
  const std::array<std::vector<float>, 3> raw = {rows_product(w.q_proj, x, n, pool_),
                                                 rows_product(w.k_proj, x, n, pool_),
                                                 rows_product(w.v_proj, x, n, pool_)};
  const std::vector<float> fa = rows_product(w.f_a_proj, x, n, pool_);
  const std::vector<float> f = rows_product(w.f_b_proj, fa.data(), n, pool_);
  const std::vector<float> beta_logits = rows_product(w.b_proj, x, n, pool_);
  const std::vector<float> gate = rows_product(weights_.layers[layer].g_proj, x, n, pool_);
  std::array<std::vector<float>, 3> conv;
  float* history = state.conv_history[slot].data();
  const std::array<const std::vector<float>*, 3> weights = {&w.q_conv, &w.k_conv, &w.v_conv};
  for (int i = 0; i < 3; ++i) {
    float* hist = history + i * (taps - 1) * channels;  // [K − 1][C], oldest first
    conv[i].resize(static_cast<std::size_t>(n * channels));
    for (int64_t t = 0; t < n; ++t) {
      const float* now = raw[i].data() + t * channels;
      for (int64_t c = 0; c < channels; ++c) {
        const float* tap = weights[i]->data() + c * taps;
        float y = 0;
        for (int64_t k = 0; k < taps - 1; ++k) y += tap[k] * hist[k * channels + c];
        y += tap[taps - 1] * now[c];
        conv[i][t * channels + c] = kernels::silu(y);
      }
      for (int64_t k = 0; k + 1 < taps - 1; ++k) {
        std::copy(hist + (k + 1) * channels, hist + (k + 2) * channels, hist + k * channels);
      }
      std::copy(now, now + channels, hist + (taps - 2) * channels);
    }
  }
  // Per token: q and k normalised per head, the log-decay of every channel, β per head.
  const auto lower_bound = static_cast<float>(config_.gate_lower_bound);
  std::vector<float> g(static_cast<std::size_t>(n * channels)), beta(static_cast<std::size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      kernels::l2_normalize(conv[0].data() + t * channels + h * d, d, kernels::kDeltaNetL2Eps,
                            1.0f / std::sqrt(static_cast<float>(d)));
      kernels::l2_normalize(conv[1].data() + t * channels + h * d, d, kernels::kDeltaNetL2Eps,
                            1.0f);
    }
    for (int64_t c = 0; c < channels; ++c) {
      g[t * channels + c] = kernels::kda_lower_bound_gate(w.exp_a_log[c / d], f[t * channels + c],
                                                          w.dt_bias[c], lower_bound);
    }
  }
  std::vector<float> y(static_cast<std::size_t>(n * channels));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < n; ++t) beta[t] = kernels::sigmoid(beta_logits[t * heads + h]);
    kernels::KdaRows rows;
    rows.q = conv[0].data() + h * d, rows.k = conv[1].data() + h * d;
    rows.v = conv[2].data() + h * d, rows.qk_stride = channels, rows.v_stride = channels;
    rows.beta = beta.data(), rows.g = g.data() + h * d, rows.g_stride = channels, rows.rows = n;
    float* s = state.delta_state[slot].data() + h * d * d;
    if (chunked) {
      kernels::kda_chunked(s, d, d, rows, y.data() + h * d, channels, options_.kda_chunk);
    } else {
      kernels::kda_recurrent(s, d, d, rows, y.data() + h * d, channels);
    }
  }
  // Output norm per head (eps 1e-5, the plain weight) and the sigmoid gate.
  for (int64_t i = 0; i < n * heads; ++i) {
    kernels::gated_rms_norm(y.data() + i * d, gate.data() + i * d, w.o_norm.data(), d, 1e-5f,
                            y.data() + i * d, kernels::Activation::kSigmoid);
  }
  kernels::matmul(weights_.layers[layer].o_proj, y.data(), n, out, pool_);
}

// §7 for `n` consecutive tokens: the query, latent and gate projections of every token at once
// (each matrix read once), then token by token the cache entry and the attention in the absorbed
// form (§7.3; a token sees the ones before it), then o for every token at once.
void KimiReference::mla(int64_t layer, const float* x, int64_t n, KimiSequenceState& state,
                        float* out) const {
  const KimiMlaWeights& w = weights_.layers[layer].mla;
  const int64_t heads = config_.num_attention_heads, q_lora = config_.q_lora_rank;
  const int64_t width = config_.mla_latent_cache_width(), v = config_.v_head_dim;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  std::vector<float> cq = rows_product(w.q_a_proj, x, n, pool_);
  for (int64_t t = 0; t < n; ++t) {
    float* row = cq.data() + t * q_lora;
    kernels::rms_norm(row, w.q_a_norm.data(), q_lora, eps, row);
  }
  const std::vector<float> q = rows_product(w.q_b_proj, cq.data(), n, pool_);
  const std::vector<float> ckv = rows_product(w.kv_a_proj, x, n, pool_);
  const std::vector<float> gate = rows_product(weights_.layers[layer].g_proj, x, n, pool_);
  std::vector<float> y(static_cast<std::size_t>(n * heads * v));
  for (int64_t t = 0; t < n; ++t) {
    attend(layer, q.data() + t * heads * config_.mla_qk_head_dim(), ckv.data() + t * width,
           gate.data() + t * heads * v, state, y.data() + t * heads * v);
  }
  kernels::matmul(weights_.layers[layer].o_proj, y.data(), n, out, pool_);
}

// One token's attention over the cache it extends: its latent normed and cached with the shared
// key, the absorbed (or the non-absorbed) attention, the sigmoid output gate: y [heads · v].
void KimiReference::attend(int64_t layer, const float* q, const float* ckv, const float* gate,
                           KimiSequenceState& state, float* y) const {
  const KimiMlaWeights& w = weights_.layers[layer].mla;
  const int64_t slot = config_.mla_slot(layer), heads = config_.num_attention_heads;
  const int64_t nope = config_.qk_nope_head_dim, shared = config_.qk_rope_head_dim;
  const int64_t rank = config_.kv_lora_rank, v = config_.v_head_dim, qk = nope + shared;
  const std::vector<float> latent = rms(ckv, w.kv_a_norm, config_.rms_norm_eps);
  if (!options_.absorbed_mla) {
    expanded_attention(layer, q, latent, ckv + rank, state, y);
    for (int64_t i = 0; i < heads * v; ++i) y[i] *= kernels::sigmoid(gate[i]);
    return;
  }
  std::vector<float> widened;
  const std::span<const float> cache = cached_latents(slot, latent, ckv + rank, state, widened);
  const int64_t positions = static_cast<int64_t>(cache.size()) / (rank + shared);
  // Each head's absorbed query [W_UK_hᵀ q_nope | q_shared], laid out as a cache row.
  std::vector<float> q_absorbed(heads * (rank + shared)), context(heads * rank);
  for (int64_t h = 0; h < heads; ++h) {
    float* row = q_absorbed.data() + h * (rank + shared);
    kernels::matmul(kernels::f32_weight_matrix(key_absorb(slot) + h * rank * nope, rank, nope),
                    q + h * qk, 1, row, pool_);
    std::copy(q + h * qk + nope, q + (h + 1) * qk, row + rank);
  }
  std::vector<float> scores(static_cast<std::size_t>(positions));
  kernels::latent_attention(q_absorbed.data(), heads, rank, shared, cache.data(), positions,
                            1.0f / std::sqrt(static_cast<float>(qk)), scores.data(),
                            context.data());
  std::vector<float> expanded(static_cast<std::size_t>(w.kv_b_proj.rows));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t first = h * (nope + v) + nope;  // W_UV_h: the head's value rows
    kernels::weight_tile(w.kv_b_proj, first, first + v, &context[h * rank], rank, 1,
                         {expanded.data(), 0, false});
    for (int64_t j = 0; j < v; ++j) {
      y[h * v + j] = expanded[first + j] * kernels::sigmoid(gate[h * v + j]);
    }
  }
}

// Appends this position's cache row [normed latent | shared key] to the slot's cache and returns
// every cached row as f32: the f32 cache in place, a bf16 one widened into `widened`.
std::span<const float> KimiReference::cached_latents(int64_t slot, const std::vector<float>& latent,
                                                     const float* shared_key,
                                                     KimiSequenceState& state,
                                                     std::vector<float>& widened) const {
  const int64_t shared = config_.qk_rope_head_dim;
  std::vector<float> row = latent;
  row.insert(row.end(), shared_key, shared_key + shared);
  const std::size_t cached = options_.bf16_latent_cache ? state.latent_cache_bf16[slot].size()
                                                        : state.latent_cache[slot].size();
  if (const float p = options_.latent_cache_perturbation; p != 0) {
    // Signs from a hash of (slot, element's place in the cache): noise-like, as roundings are.
    for (std::size_t i = 0; i < row.size(); ++i) {
      uint64_t h = (options_.latent_cache_perturbation_seed << 56) ^
                   (static_cast<uint64_t>(slot) << 48) ^ (cached + i);
      h = (h ^ (h >> 31)) * 0x7fb5d329728ea185ull;
      h = (h ^ (h >> 27)) * 0x81dadef4bc2dd44dull;
      row[i] *= 1 + ((h >> 63) != 0 ? p : -p);
    }
  }
  if (!options_.bf16_latent_cache) {
    std::vector<float>& cache = state.latent_cache[slot];
    cache.insert(cache.end(), row.begin(), row.end());
    return cache;
  }
  std::vector<uint16_t>& cache = state.latent_cache_bf16[slot];
  for (float v : row) cache.push_back(f32_to_bf16(v));
  widened.resize(cache.size());
  for (std::size_t k = 0; k < cache.size(); ++k) widened[k] = bf16_to_f32(cache[k]);
  return widened;
}

// §7.1's non-absorbed attention: this position's latent expanded by kv_b_proj into every head's
// key [k_nope | shared key] and value, cached, and each head attending over all cached positions.
void KimiReference::expanded_attention(int64_t layer, const float* q,
                                       const std::vector<float>& latent, const float* shared_key,
                                       KimiSequenceState& state, float* y) const {
  const int64_t slot = config_.mla_slot(layer), heads = config_.num_attention_heads;
  const int64_t nope = config_.qk_nope_head_dim, shared = config_.qk_rope_head_dim;
  const int64_t v = config_.v_head_dim, qk = nope + shared, per_head = qk + v;
  const std::vector<float> kv = product(weights_.layers[layer].mla.kv_b_proj, latent.data(), pool_);
  std::vector<float>& cache = state.kv_cache[slot];
  for (int64_t h = 0; h < heads; ++h) {
    const float* head = kv.data() + h * (nope + v);
    cache.insert(cache.end(), head, head + nope);                // k_nope
    cache.insert(cache.end(), shared_key, shared_key + shared);  // the shared key part
    cache.insert(cache.end(), head + nope, head + nope + v);     // v
  }
  const int64_t positions = static_cast<int64_t>(cache.size()) / (heads * per_head);
  std::vector<float> scores(static_cast<std::size_t>(positions));
  for (int64_t h = 0; h < heads; ++h) {
    const float* head = cache.data() + h * per_head;  // key [qk], then value [v]
    const kernels::KeyRun run{head, head + qk, positions, heads * per_head};
    kernels::attend_runs(q + h * qk, {&run, 1}, qk, v, 1.0f / std::sqrt(static_cast<float>(qk)),
                         scores.data(), y + h * v);
  }
}

// §8 for `n` tokens: the dense SiTU MLP of the first layers, else the latent MoE (corrected
// sigmoid router, MXFP4 experts mixed in selection order, the latent norm and up-projection) plus
// the shared experts. Every matrix is read once for all the tokens, each expert once for the
// tokens that chose it; each token's arithmetic is the same as alone.
void KimiReference::ffn(int64_t layer, const float* x, int64_t n, float* out) const {
  const KimiLayerWeights& lw = weights_.layers[layer];
  const kernels::SituParams situ = situ_params(config_);
  // act(gate, up) · down over `rows` rows of `in`.
  auto situ_mlp = [&](const kernels::WeightMatrix& gate, const kernels::WeightMatrix& up,
                      const kernels::WeightMatrix& down, const float* in, int64_t rows, float* y) {
    std::vector<float> g = rows_product(gate, in, rows, pool_);
    const std::vector<float> u = rows_product(up, in, rows, pool_);
    kernels::situ_rows(g.data(), u.data(), static_cast<int64_t>(g.size()), situ, g.data());
    kernels::matmul(down, g.data(), rows, y, pool_);
  };
  if (!config_.is_moe_layer(layer)) {
    situ_mlp(lw.dense_gate, lw.dense_up, lw.dense_down, x, n, out);
    return;
  }
  const KimiMoeWeights& w = lw.moe;
  const int64_t experts = config_.num_experts, k = config_.num_experts_per_token;
  const int64_t h = config_.hidden_size, width = config_.routed_expert_hidden_size;
  const std::vector<float> logits = rows_product(w.router, x, n, pool_);
  const std::vector<float> zero(static_cast<std::size_t>(experts), 0.0f);
  const float* bias =
      options_.ablation == KimiAblation::kNoCorrectionBias ? zero.data() : w.router_bias.data();
  std::vector<float> scratch(static_cast<std::size_t>(3 * experts));
  std::vector<std::array<kernels::ExpertChoice, kernels::kMaxExpertsPerToken>> choices(
      static_cast<std::size_t>(n));
  std::map<int32_t, std::vector<int64_t>> users;  // expert → the (token · k + slot) that chose it
  for (int64_t t = 0; t < n; ++t) {
    kernels::route_sigmoid_bias_top_k(logits.data() + t * experts, bias, experts, k, 1.0f, 0.0f,
                                      scratch.data(), choices[t].data());
    for (int64_t slot = 0; slot < k; ++slot) users[choices[t][slot].expert].push_back(t * k + slot);
  }
  const std::vector<float> latent = rows_product(w.latent_down, x, n, pool_);
  // Each (token, slot) expert output, the expert's rows gathered so that it runs once.
  std::vector<float> each(static_cast<std::size_t>(n * k * width)), gathered;
  for (const auto& [expert, uses] : users) {
    const auto rows = static_cast<int64_t>(uses.size());
    gathered.resize(static_cast<std::size_t>(rows * width));
    for (int64_t j = 0; j < rows; ++j) {
      const float* row = latent.data() + (uses[j] / k) * width;
      std::copy(row, row + width, gathered.begin() + j * width);
    }
    std::vector<float> o(static_cast<std::size_t>(rows * width));
    situ_mlp(w.experts.gate[expert], w.experts.up[expert], w.experts.down[expert], gathered.data(),
             rows, o.data());
    for (int64_t j = 0; j < rows; ++j) {
      std::copy(o.begin() + j * width, o.begin() + (j + 1) * width, each.begin() + uses[j] * width);
    }
  }
  std::vector<float> normed(static_cast<std::size_t>(n * width));
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> acc(static_cast<std::size_t>(width), 0.0f);
    for (int64_t slot = 0; slot < k; ++slot) {
      const float* o = each.data() + (t * k + slot) * width;
      for (int64_t i = 0; i < width; ++i) acc[i] += o[i] * choices[t][slot].weight;
    }
    kernels::rms_norm(acc.data(), w.latent_norm.data(), width,
                      static_cast<float>(config_.rms_norm_eps), normed.data() + t * width);
  }
  kernels::matmul(w.latent_up, normed.data(), n, out, pool_);
  if (config_.num_shared_experts > 0) {
    std::vector<float> shared(static_cast<std::size_t>(n * h));
    situ_mlp(w.shared_gate, w.shared_up, w.shared_down, x, n, shared.data());
    for (int64_t i = 0; i < n * h; ++i) out[i] += shared[i];
  }
}

// §5.2's per-token timeline, layer by layer over `n` consecutive tokens: every token has its own
// stored blocks and prefix; every projection runs the tokens together, KDA's recurrence too
// (chunked for a prompt), MLA's attention one token after another (a token sees the ones before).
void KimiReference::run(const int32_t* ids, int64_t n, KimiSequenceState& state, bool chunked,
                        float* logits, int64_t logit_rows, float* taps) const {
  const int64_t h = config_.hidden_size, block = config_.attn_res_block_size;
  const double eps = config_.rms_norm_eps;
  const auto width = static_cast<std::size_t>(h);
  std::vector<std::vector<float>> stored;  // the pushed blocks, [n][H] each
  std::vector<float> prefix(n * width), mixed(n * width), x(n * width), sub(n * width);
  for (int64_t t = 0; t < n; ++t) {
    if (!kernels::row_to_f32(weights_.embed_tokens, ids[t], prefix.data() + t * h)) {
      fail("the embedding's format cannot be read");
    }
  }
  auto mix_all = [&](const std::vector<float>& w) {
    for (int64_t t = 0; t < n; ++t) {
      std::vector<const float*> blocks;
      for (const auto& s : stored) blocks.push_back(s.data() + t * h);
      mix(blocks, prefix.data() + t * h, w.data(), mixed.data() + t * h);
    }
  };
  auto norm_all = [&](const std::vector<float>& w) {
    for (int64_t t = 0; t < n; ++t) {
      kernels::rms_norm(mixed.data() + t * h, w.data(), h, static_cast<float>(eps),
                        x.data() + t * h);
    }
  };
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const KimiLayerWeights& w = weights_.layers[l];
    mix_all(w.attention_mix);
    const bool fresh = kernels::pushes_block(l, block);
    if (fresh) stored.push_back(prefix);
    norm_all(w.input_norm);
    if (config_.layer_kind(l) == KimiLayerKind::kKda) {
      kda(l, x.data(), n, state, sub.data(), chunked);
    } else {
      mla(l, x.data(), n, state, sub.data());
    }
    for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = fresh ? sub[i] : prefix[i] + sub[i];
    mix_all(w.mlp_mix);
    norm_all(w.post_attention_norm);
    ffn(l, x.data(), n, sub.data());
    for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] += sub[i];
    copy_taps(l, prefix.data(), n, taps);
  }
  mix_all(weights_.output_mix);
  norm_all(weights_.final_norm);
  if (logit_rows > 0) {
    kernels::matmul(weights_.lm_head, x.data() + (n - logit_rows) * h, logit_rows, logits, pool_);
  }
  state.position += n;
}

void KimiReference::copy_taps(int64_t layer, const float* prefix, int64_t n, float* taps) const {
  if (taps == nullptr) return;
  const int64_t h = config_.hidden_size, count = static_cast<int64_t>(tap_layers_.size());
  for (int64_t j = 0; j < count; ++j) {
    if (tap_layers_[j] != layer) continue;
    for (int64_t t = 0; t < n; ++t) {
      std::copy(prefix + t * h, prefix + (t + 1) * h, taps + (t * count + j) * h);
    }
  }
}

void KimiReference::step(int32_t token, KimiSequenceState& state, float* logits) const {
  run(&token, 1, state, false, logits, 1, nullptr);
}

void KimiReference::prefill(const std::vector<int32_t>& ids, KimiSequenceState& state,
                            float* logits) const {
  const auto n = static_cast<int64_t>(ids.size());
  run(ids.data(), n, state, true, logits, n, nullptr);
}

}  // namespace md
