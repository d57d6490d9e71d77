#include "models/qwen38/qwen38_tensor_shard.h"

#include <utility>
#include <vector>

#include "base/error.h"
#include "models/common/slice_source.h"
#include "models/common/tensor_shard.h"

namespace md {

namespace {

using shard::Range;

// Each head of `heads` as the range of its `width` rows (or columns) from `offset`, adjacent
// heads merged.
std::vector<Range> head_ranges(const std::vector<int64_t>& heads, int64_t width,
                               int64_t offset = 0) {
  std::vector<Range> out;
  for (int64_t h : heads) {
    const Range r{offset + h * width, offset + (h + 1) * width};
    if (!out.empty() && out.back().end == r.begin) {
      out.back().end = r.end;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<int64_t> all_of(Range r) {
  std::vector<int64_t> out;
  for (int64_t i = r.begin; i < r.end; ++i) out.push_back(i);
  return out;
}

// The value heads of key heads `keys`, in the order the rank's own layout numbers them: grouped
// (kh·group + m, key head by key head) or tiled (kh + m·key_heads, the rank's key heads within
// each m), so that the rank's DeltaNet pairs them with its key heads as the whole model does.
std::vector<int64_t> value_heads_of(const Qwen38Config& c, Range keys) {
  const int64_t group = c.linear_head_group(), key_heads = c.linear_num_key_heads;
  std::vector<int64_t> out;
  if (c.value_heads_tiled) {
    for (int64_t m = 0; m < group; ++m) {
      for (int64_t kh = keys.begin; kh < keys.end; ++kh) out.push_back(kh + m * key_heads);
    }
  } else {
    for (int64_t kh = keys.begin; kh < keys.end; ++kh) {
      for (int64_t m = 0; m < group; ++m) out.push_back(kh * group + m);
    }
  }
  return out;
}

Qwen38GdnWeights shard_delta_net(const Qwen38Config& c, const Qwen38GdnWeights& w, Range keys,
                                 shard::Slicer& take, const std::string& tag) {
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim,
                kernel = c.linear_conv_kernel;
  const std::vector<int64_t> key_heads = all_of(keys), value_heads = value_heads_of(c, keys);
  // The conv channels: q and k of the key heads, then v of the value heads.
  std::vector<Range> channels = head_ranges(key_heads, dk);
  for (const Range& r : head_ranges(key_heads, dk, c.key_dim())) channels.push_back(r);
  for (const Range& r : head_ranges(value_heads, dv, 2 * c.key_dim())) channels.push_back(r);
  const std::vector<Range> values = head_ranges(value_heads, dv),
                           heads = head_ranges(value_heads, 1);
  Qwen38GdnWeights s;
  s.in_proj_qkv = take.rows(w.in_proj_qkv, channels, tag + "in_proj_qkv");
  s.in_proj_z = take.rows(w.in_proj_z, values, tag + "in_proj_z");
  s.in_proj_b = take.rows(w.in_proj_b, heads, tag + "in_proj_b");
  s.in_proj_a = take.rows(w.in_proj_a, heads, tag + "in_proj_a");
  s.conv1d = shard::rows_of(w.conv1d, kernel, channels);
  s.decay_factor = shard::rows_of(w.decay_factor, 1, heads);
  s.dt_bias = shard::rows_of(w.dt_bias, 1, heads);
  s.norm = w.norm;
  s.out_proj = take.columns(w.out_proj, values, tag + "out_proj");
  return s;
}

Qwen38AttentionWeights shard_attention(const Qwen38Config& c, const Qwen38AttentionWeights& w,
                                       const shard::HeadShard& heads, bool keeps_bias,
                                       shard::Slicer& take, const std::string& tag) {
  const int64_t hd = c.head_dim;
  const std::vector<Range> q{{heads.heads.begin * 2 * hd, heads.heads.end * 2 * hd}};
  const std::vector<Range> kv{{heads.kv_heads.begin * hd, heads.kv_heads.end * hd}};
  const std::vector<Range> o{{heads.heads.begin * hd, heads.heads.end * hd}};
  Qwen38AttentionWeights s;
  s.q_proj = take.rows(w.q_proj, q, tag + "q_proj");
  s.k_proj = take.rows(w.k_proj, kv, tag + "k_proj");
  s.v_proj = take.rows(w.v_proj, kv, tag + "v_proj");
  s.o_proj = take.columns(w.o_proj, o, tag + "o_proj");
  s.q_norm = w.q_norm;
  s.k_norm = w.k_norm;
  if (!w.q_bias.empty()) s.q_bias = shard::rows_of(w.q_bias, 1, q);
  if (!w.k_bias.empty()) s.k_bias = shard::rows_of(w.k_bias, 1, kv);
  if (!w.v_bias.empty()) s.v_bias = shard::rows_of(w.v_bias, 1, kv);
  if (keeps_bias) s.o_bias = w.o_bias;  // added once: rank 0's partial carries it
  return s;
}

}  // namespace

Qwen38Shard shard_qwen38(const Qwen38Config& config, Qwen38Weights weights, int rank, int ranks,
                         const std::string& model, shard::SliceSource* slices) {
  const Qwen38Config& c = config;
  if (ranks > c.linear_num_key_heads) {
    fail("{}: {} ranks cannot share {} Gated DeltaNet key heads (use at most {} ranks)", model,
         ranks, c.linear_num_key_heads, c.linear_num_key_heads);
  }
  const shard::HeadShard heads =
      shard::attention_heads(c.num_attention_heads, c.num_key_value_heads, rank, ranks, model);
  const Range keys = shard::even_part(c.linear_num_key_heads, ranks, rank);
  // The FFN's columns: a dense MLP's, or a MoE block's shared expert's (its routed experts are
  // dealt to the ranks whole: expert parallelism).
  int64_t unit = 1;
  for (const Qwen38LayerWeights& l : weights.layers) {
    unit = std::max(unit, shard::column_unit(c.is_moe() ? l.moe.shared_down_proj : l.down_proj));
  }
  const int64_t columns = c.is_moe() ? c.moe.shared_intermediate : c.intermediate_size;
  if (columns % unit != 0 || columns / unit < ranks) {
    fail("{}: {} FFN columns cannot be shared among {} ranks in blocks of {}", model, columns,
         ranks, unit);
  }
  if (c.is_moe()) (void)shard::routed_experts(c.moe.experts, rank, ranks, model);
  const Range ffn = shard::even_part(columns, ranks, rank, unit);
  const std::vector<Range> ffn_ranges{ffn};
  const std::vector<Range> vocab{shard::even_part(c.vocab_size, ranks, rank)};

  Qwen38Shard out{c, {}};
  out.config.num_attention_heads = heads.heads.size();
  out.config.num_key_value_heads = heads.kv_heads.size();
  out.config.linear_num_key_heads = keys.size();
  out.config.linear_num_value_heads = keys.size() * c.linear_head_group();
  if (c.is_moe()) {
    out.config.moe.shared_intermediate = ffn.size();
  } else {
    out.config.intermediate_size = ffn.size();
  }
  Qwen38Weights& w = out.weights;
  w.embed_tokens = weights.embed_tokens;
  w.norm = std::move(weights.norm);
  shard::Slicer take(slices, w.sliced, model);
  w.slice_storage = take.storage();
  w.lm_head = take.rows(weights.lm_head, vocab, "lm_head");
  w.prefix = weights.prefix;
  w.owned = std::move(weights.owned);
  w.storage = std::move(weights.storage);
  for (std::size_t i = 0; i < weights.layers.size(); ++i) {
    Qwen38LayerWeights& whole = weights.layers[i];
    const auto layer = static_cast<int64_t>(i);
    const std::string tag = fmt::format("layer {} ", layer);
    Qwen38LayerWeights l;
    l.input_layernorm = std::move(whole.input_layernorm);
    l.post_attention_layernorm = std::move(whole.post_attention_layernorm);
    if (c.is_full_attention(layer)) {
      l.attention = shard_attention(c, whole.attention, heads, rank == 0, take, tag);
    } else {
      l.gdn = shard_delta_net(c, whole.gdn, keys, take, tag);
    }
    if (c.is_moe()) {
      // Every rank routes its (identical) rows with the whole router, runs the chosen experts it
      // holds (all stay mapped; the step runs the rank's share) and its columns of the shared
      // expert, whose σ gate stays whole.
      l.moe = std::move(whole.moe);
      l.moe.shared_gate_proj =
          take.rows(l.moe.shared_gate_proj, ffn_ranges, tag + "shared_gate_proj");
      l.moe.shared_up_proj = take.rows(l.moe.shared_up_proj, ffn_ranges, tag + "shared_up_proj");
      l.moe.shared_down_proj =
          take.columns(l.moe.shared_down_proj, ffn_ranges, tag + "shared_down_proj");
    } else {
      l.gate_proj = take.rows(whole.gate_proj, ffn_ranges, tag + "gate_proj");
      l.up_proj = take.rows(whole.up_proj, ffn_ranges, tag + "up_proj");
      l.down_proj = take.columns(whole.down_proj, ffn_ranges, tag + "down_proj");
    }
    w.layers.push_back(std::move(l));
  }
  return out;
}

}  // namespace md
