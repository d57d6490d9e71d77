// An independent double-precision DFlash2 forward, written from the spec's formulas with plain
// loops (no kernels, no shared code with the drafter): what the tests hold the drafter to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dflash2_test_util.h"

namespace md::test {

using Vec = std::vector<double>;

struct OracleOptions {
  bool causal_block = false;  // negative controls of the ablations, for the tests of the tests
  bool skip_conv = false;
};

struct OracleRound {
  std::vector<Vec> logits;  // rows 1..B-1, [vocab]
  std::vector<Vec> rho;     // rows 1..B-1, [rank]
};

class Dflash2Oracle {
 public:
  Dflash2Oracle(const nlohmann::json& config, const RefWeights& weights, const TargetView& target)
      : w_(weights), target_(target) {
    h_ = config["hidden_size"];
    layers_ = config["num_hidden_layers"];
    heads_ = config["num_attention_heads"];
    kv_heads_ = config["num_key_value_heads"];
    hd_ = config["head_dim"];
    eps_ = config["rms_norm_eps"];
    theta_ = config["rope_parameters"]["rope_theta"];
    window_ = config["sliding_window"];
    vocab_ = config["vocab_size"];
    const nlohmann::json& d = config["dflash_config"];
    block_ = d["block_size"];
    mask_ = d["mask_token_id"];
    taps_ = static_cast<int64_t>(d["target_layer_ids"].size());
    conv_taps_ = d["conv_kernel_size"];
    group_size_ = d["conv_group_size"];
  }

  // ctx_p = RMSNorm_plain(fc · f_p; hidden_norm) for each row of taps.
  void append(const std::vector<float>& taps, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      Vec f(taps.begin() + r * taps_ * h_, taps.begin() + (r + 1) * taps_ * h_);
      ctx_.push_back(rms_norm(linear("fc.weight", f), at("hidden_norm.weight")));
    }
  }
  void truncate(int64_t n) { ctx_.resize(static_cast<std::size_t>(n)); }
  const Vec& feature(int64_t p) const { return ctx_[static_cast<std::size_t>(p)]; }

  OracleRound propose(int32_t anchor, const OracleOptions& options = {}) const {
    auto s = static_cast<int64_t>(ctx_.size());
    std::vector<Vec> hs;
    for (int64_t t = 0; t < block_; ++t) hs.push_back(embed(t == 0 ? anchor : mask_));
    for (int64_t l = 0; l < layers_; ++l) {
      std::string p = "layers." + std::to_string(l) + ".";
      // Attention sub-layer.
      std::vector<Vec> x =
          map_rows(hs, [&](const Vec& r) { return rms_norm(r, at(p + "input_layernorm.weight")); });
      std::vector<Vec> dyn = map_rows(x, [&](const Vec& r) {
        return linear(p + "attention_conv.kernel_projection.weight", r);
      });
      std::vector<Vec> xc = conv(p + "attention_conv.", 0, x, dyn, options);
      std::vector<Vec> attn = attention(p, xc, s, options);
      std::vector<Vec> o =
          map_rows(attn, [&](const Vec& r) { return linear(p + "self_attn.o_proj.weight", r); });
      add(hs, conv(p + "attention_conv.", 1, o, dyn, options));
      // MLP sub-layer.
      std::vector<Vec> x2 = map_rows(
          hs, [&](const Vec& r) { return rms_norm(r, at(p + "post_attention_layernorm.weight")); });
      std::vector<Vec> dyn2 = map_rows(
          x2, [&](const Vec& r) { return linear(p + "mlp_conv.kernel_projection.weight", r); });
      std::vector<Vec> mc = conv(p + "mlp_conv.", 0, x2, dyn2, options);
      std::vector<Vec> m = map_rows(mc, [&](const Vec& r) {
        Vec g = linear(p + "mlp.gate_proj.weight", r);
        Vec u = linear(p + "mlp.up_proj.weight", r);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        return linear(p + "mlp.down_proj.weight", g);
      });
      add(hs, conv(p + "mlp_conv.", 1, m, dyn2, options));
    }
    OracleRound round;
    for (int64_t t = 1; t < block_; ++t) {
      Vec hf = rms_norm(hs[static_cast<std::size_t>(t)], at("norm.weight"));
      Vec logits(static_cast<std::size_t>(vocab_));
      for (int64_t v = 0; v < vocab_; ++v) {
        double sum = 0;
        for (int64_t c = 0; c < h_; ++c)
          sum += bf16_to_f32(kernels::bf16_row(target_.lm_head, v)[c]) *
                 hf[static_cast<std::size_t>(c)];
        logits[static_cast<std::size_t>(v)] = sum;
      }
      round.logits.push_back(std::move(logits));
      round.rho.push_back(linear("candidate_selector.hidden_projection.weight", hf));
    }
    return round;
  }

  // The selector scores of one row for predecessor `prev` over candidate ids with unary scores.
  Vec scores(int32_t prev, const Vec& rho,
             const std::vector<std::pair<int32_t, double>>& cands) const {
    const RefTensor& pcb = at("candidate_selector.predecessor_codebook");
    const RefTensor& scb = at("candidate_selector.successor_codebook");
    int64_t rank = pcb.shape[1];
    Vec out;
    for (const auto& [id, unary] : cands) {
      double sum = unary;
      for (int64_t r = 0; r < rank; ++r) {
        sum += pcb.values[static_cast<std::size_t>(prev * rank + r)] *
               rho[static_cast<std::size_t>(r)] *
               scb.values[static_cast<std::size_t>(id * rank + r)];
      }
      out.push_back(sum);
    }
    return out;
  }

 private:
  const RefTensor& at(const std::string& name) const { return w_.at(name); }

  template <typename F>
  static std::vector<Vec> map_rows(const std::vector<Vec>& rows, F f) {
    std::vector<Vec> out;
    for (const Vec& r : rows) out.push_back(f(r));
    return out;
  }
  static void add(std::vector<Vec>& h, const std::vector<Vec>& delta) {
    for (std::size_t t = 0; t < h.size(); ++t) {
      for (std::size_t c = 0; c < h[t].size(); ++c) h[t][c] += delta[t][c];
    }
  }

  Vec embed(int64_t token) const {
    Vec e(static_cast<std::size_t>(h_));
    for (int64_t c = 0; c < h_; ++c)
      e[static_cast<std::size_t>(c)] =
          bf16_to_f32(kernels::bf16_row(target_.embed_tokens, token)[c]);
    return e;
  }

  Vec linear(const std::string& name, const Vec& x) const {
    const RefTensor& t = at(name);
    int64_t rows = t.shape[0], cols = t.shape[1];
    Vec y(static_cast<std::size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c)
        sum += t.values[static_cast<std::size_t>(r * cols + c)] * x[static_cast<std::size_t>(c)];
      y[static_cast<std::size_t>(r)] = sum;
    }
    return y;
  }

  Vec rms_norm(const Vec& x, const RefTensor& w, int64_t offset = 0, int64_t n = -1) const {
    if (n < 0) n = static_cast<int64_t>(x.size());
    double ms = 0;
    for (int64_t i = 0; i < n; ++i)
      ms += x[static_cast<std::size_t>(offset + i)] * x[static_cast<std::size_t>(offset + i)];
    double inv = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps_);
    Vec y(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      y[static_cast<std::size_t>(i)] =
          x[static_cast<std::size_t>(offset + i)] * inv * w.values[static_cast<std::size_t>(i)];
    return y;
  }

  // RMSNorm_plain per head, then rotate-half RoPE over the whole head at `position`.
  Vec head(const Vec& x, int64_t index, const RefTensor& norm, int64_t position) const {
    Vec y = rms_norm(x, norm, index * hd_, hd_);
    int64_t half = hd_ / 2;
    for (int64_t j = 0; j < half; ++j) {
      double angle = static_cast<double>(position) *
                     std::pow(theta_, -2.0 * static_cast<double>(j) / static_cast<double>(hd_));
      double a = y[static_cast<std::size_t>(j)], b = y[static_cast<std::size_t>(j + half)];
      y[static_cast<std::size_t>(j)] = a * std::cos(angle) - b * std::sin(angle);
      y[static_cast<std::size_t>(j + half)] = b * std::cos(angle) + a * std::sin(angle);
    }
    return y;
  }

  // Direct shift-sum: out[t][c] = Σ_tap (base[side][tap][c] + dyn[t][side][tap][c/g]) x[t−tap][c].
  std::vector<Vec> conv(const std::string& p, int side, const std::vector<Vec>& x,
                        const std::vector<Vec>& dyn, const OracleOptions& options) const {
    if (options.skip_conv) return x;
    const RefTensor& base = at(p + "base_kernel");
    int64_t groups = h_ / group_size_;
    std::vector<Vec> out(x.size(), Vec(static_cast<std::size_t>(h_), 0.0));
    for (int64_t t = 0; t < static_cast<int64_t>(x.size()); ++t) {
      for (int64_t c = 0; c < h_; ++c) {
        double sum = 0;
        for (int64_t tap = 0; tap < conv_taps_; ++tap) {
          if (t - tap < 0) continue;
          double k =
              base.values[static_cast<std::size_t>((side * conv_taps_ + tap) * h_ + c)] +
              dyn[static_cast<std::size_t>(t)]
                 [static_cast<std::size_t>((side * conv_taps_ + tap) * groups + c / group_size_)];
          sum += k * x[static_cast<std::size_t>(t - tap)][static_cast<std::size_t>(c)];
        }
        out[static_cast<std::size_t>(t)][static_cast<std::size_t>(c)] = sum;
      }
    }
    return out;
  }

  std::vector<Vec> attention(const std::string& p, const std::vector<Vec>& xc, int64_t s,
                             const OracleOptions& options) const {
    const RefTensor& qn = at(p + "self_attn.q_norm.weight");
    const RefTensor& kn = at(p + "self_attn.k_norm.weight");
    // Every key as (position, per-kv-head K after norm + RoPE, V): context then block.
    struct Key {
      int64_t position;
      int64_t block_row;  // -1 for context
      std::vector<Vec> k, v;
    };
    std::vector<Key> keys;
    auto make_key = [&](const Vec& x, int64_t position, int64_t row) {
      Vec k = linear(p + "self_attn.k_proj.weight", x);
      Vec v = linear(p + "self_attn.v_proj.weight", x);
      Key key{position, row, {}, {}};
      for (int64_t g = 0; g < kv_heads_; ++g) {
        key.k.push_back(head(k, g, kn, position));
        key.v.push_back(Vec(v.begin() + g * hd_, v.begin() + (g + 1) * hd_));
      }
      keys.push_back(std::move(key));
    };
    for (int64_t q = 0; q < s; ++q) make_key(ctx_[static_cast<std::size_t>(q)], q, -1);
    for (int64_t t = 0; t < block_; ++t) make_key(xc[static_cast<std::size_t>(t)], s + t, t);

    std::vector<Vec> out;
    for (int64_t t = 0; t < block_; ++t) {
      Vec q = linear(p + "self_attn.q_proj.weight", xc[static_cast<std::size_t>(t)]);
      Vec o(static_cast<std::size_t>(heads_ * hd_), 0.0);
      for (int64_t hh = 0; hh < heads_; ++hh) {
        Vec qh = head(q, hh, qn, s + t);
        int64_t g = hh / (heads_ / kv_heads_);
        std::vector<std::pair<double, const Vec*>> visible;
        for (const Key& key : keys) {
          int64_t delta = s + t - key.position;
          if (std::abs(delta) >= window_) continue;
          if (options.causal_block && key.block_row > t) continue;
          double dot = 0;
          for (int64_t d = 0; d < hd_; ++d)
            dot += qh[static_cast<std::size_t>(d)] *
                   key.k[static_cast<std::size_t>(g)][static_cast<std::size_t>(d)];
          visible.emplace_back(dot / std::sqrt(static_cast<double>(hd_)),
                               &key.v[static_cast<std::size_t>(g)]);
        }
        double top = -1e300, total = 0;
        for (const auto& [score, v] : visible) top = std::max(top, score);
        for (const auto& [score, v] : visible) total += std::exp(score - top);
        for (const auto& [score, v] : visible) {
          double weight = std::exp(score - top) / total;
          for (int64_t d = 0; d < hd_; ++d)
            o[static_cast<std::size_t>(hh * hd_ + d)] += weight * (*v)[static_cast<std::size_t>(d)];
        }
      }
      out.push_back(std::move(o));
    }
    return out;
  }

  const RefWeights& w_;
  const TargetView& target_;
  int64_t h_, layers_, heads_, kv_heads_, hd_, window_, vocab_, block_, mask_, taps_, conv_taps_,
      group_size_;
  double eps_, theta_;
  std::vector<Vec> ctx_;
};

}  // namespace md::test
