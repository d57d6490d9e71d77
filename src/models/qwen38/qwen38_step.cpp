#include "models/qwen38/qwen38_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/causal_conv.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/common/step_builder.h"
#include "models/common/step_rows.h"
#include "models/qwen38/qwen38_head_math.h"

namespace md {

namespace {

using kernels::WeightMatrix;
using program::NormKind;

// lm_head tiles are at least this large: the per-tile argmax results stay few.
constexpr int64_t kMinVocabTile = 256;
// A prefill chunk's attention tasks: a KV head over this many rows, its queries sharing each key
// tile's load.
constexpr int64_t kAttentionRowBlock = 8;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

// attention_bias: the tiles of a matrix add its bias (none when empty).
void with_bias(std::vector<program::Tile>& tiles, const std::vector<float>& bias,
               std::size_t first = 0) {
  if (bias.empty()) return;
  for (std::size_t t = first; t < tiles.size(); ++t) tiles[t].bias = bias.data();
}

}  // namespace

Qwen38Step::Qwen38Step(const Qwen38Config& config, const Qwen38Weights& weights,
                       const kernels::Rope& rope, int64_t max_rows, RowMode mode, int workers,
                       int64_t max_context, std::vector<int64_t> tap_layers, LogitRows logits,
                       int64_t delta_rule_chunk, dist::Communicator* ranks)
    : config_(config),
      weights_(weights),
      rope_(rope),
      max_rows_(max_rows),
      mode_(mode),
      logit_rows_(mode == RowMode::kPrefill ? logits : LogitRows::kAll),
      delta_rule_chunk_(mode == RowMode::kPrefill ? delta_rule_chunk : 0),
      vocab_(config.vocab_size),
      max_context_(max_context),
      tap_layers_(std::move(tap_layers)) {
  const int64_t most = mode == RowMode::kPrefill ? kMaxPrefillRows : kMaxRows;
  if (max_rows < 1 || max_rows > most) fail("a step takes 1..{} rows, not {}", most, max_rows);
  build(workers, ranks);
}

void Qwen38Step::build(int workers, dist::Communicator* ranks) {
  const Qwen38Config& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size;
  const int64_t I = c.is_moe() ? c.moe.shared_intermediate : c.intermediate_size;
  const int64_t gdn_width = c.conv_dim() + c.value_dim() + 2 * c.linear_num_value_heads;
  const auto n_taps = static_cast<int64_t>(tap_layers_.size());
  for (auto [storage, width] : {std::pair{&hidden_, H},
                                {&gdn_proj_, gdn_width},
                                {&gdn_core_, c.value_dim()},
                                {&attn_q_, c.q_proj_dim()},
                                {&attn_k_, c.kv_dim()},
                                {&attn_v_, c.kv_dim()},
                                {&attn_out_, c.attn_output_dim()},
                                {&gate_, I},
                                {&up_, I},
                                {&angles_, c.rotary_dim()},
                                // Prefill writes the caller's logits (prepare() rebinds them).
                                {&logits_, mode_ == RowMode::kPrefill ? 0 : vocab_},
                                {&taps_, n_taps * H},
                                {&router_, c.is_moe() ? c.moe.experts + 1 : 0},
                                {&moe_in_, c.is_moe() ? H : 0}}) {
    storage->assign(size(R * width), 0.0f);
  }
  // One entry per (expert, row) pair a step can have (program::MoePlan).
  expert_act_.assign(size(R * c.moe.experts_per_token * c.moe.intermediate), 0.0f);
  // The lm_head reads every row, or the last one only.
  const bool last_only = logit_rows_ == LogitRows::kLast;
  const int64_t logit_rows = last_only ? 1 : R;
  greedy_.assign(size(logit_rows), 0);
  rank_ = std::make_unique<RankBuffers>(ranks, R, H, logit_rows, vocab_);
  StepBuilder b(workers);
  ids_ = {b.buffer(hidden_),
          b.buffer(gdn_proj_),
          b.buffer(gdn_core_),
          b.buffer(attn_q_),
          b.buffer(attn_k_),
          b.buffer(attn_v_),
          b.buffer(attn_out_),
          b.buffer(gate_),
          b.buffer(up_),
          b.buffer(angles_),
          b.buffer(logits_),
          b.buffer(taps_),
          b.buffer(router_),
          b.buffer(moe_in_),
          b.buffer(expert_act_),
          b.buffer(rank_->partial),
          b.buffer(rank_->local_logits)};

  if (mode_ == RowMode::kVerify) snapshots_.resize(size(c.num_linear_attention_layers()));
  int32_t residual =
      b.add({"embed", R, program::EmbedOperands{weights_.embed_tokens, ids_.hidden}, {}, {}});
  int32_t angles = b.add({"rope_angles", R, program::RopeOperands{&rope_, ids_.angles}, {}, {}});
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    residual = c.is_full_attention(layer) ? add_attention(b, layer, residual, angles)
                                          : add_delta_net(b, layer, residual);
    residual = c.is_moe() ? add_moe(b, layer, residual) : add_mlp(b, layer, residual);
  }
  program::RowInput final_rows =
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, weights_.norm.data(),
                              static_cast<float>(c.rms_norm_eps));
  if (last_only) final_rows.first_row = -1;
  b.lm_head_argmax(final_rows, weights_.lm_head, ids_.logits, kMinVocabTile, tile_max_, tile_arg_,
                   greedy_.data(), {b.all(residual)}, {}, logit_rows,
                   rank_->vocab_shard(ids_.local_logits, ids_.logits));
  // Worker scratch: what a delta-net key head needs (attention keeps its scores itself; the MoE
  // instructions declare theirs to the builder).
  program_ = b.build(size(delta_net_scratch_), R);
}

int32_t Qwen38Step::residual_projection(StepBuilder& b, const std::string& name,
                                        program::RowInput input, std::vector<program::Tile> tiles,
                                        int32_t after) {
  return b.residual_projection(name, input, std::move(tiles), {b.all(after)}, rank_->ranks(),
                               ids_.partial);
}

int32_t Qwen38Step::add_delta_net(StepBuilder& b, int64_t layer, int32_t residual) {
  const Qwen38Config& c = config_;
  const Qwen38LayerWeights& lw = weights_.layers[size(layer)];
  const Qwen38GdnWeights& w = lw.gdn;
  const int64_t H = c.hidden_size, nv = c.linear_num_value_heads;
  const int64_t gdn_width = c.conv_dim() + c.value_dim() + 2 * nv;
  const int64_t z_at = c.conv_dim(), b_at = z_at + c.value_dim(), a_at = b_at + nv;
  const int64_t ordinal = c.linear_attention_ordinal(layer);
  const std::string tag = fmt::format("L{}.", layer);

  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.in_proj_qkv, ids_.gdn_proj, 0, gdn_width, false);
  b.add_tiles(tiles, w.in_proj_z, ids_.gdn_proj, z_at, gdn_width, false);
  b.add_tiles(tiles, w.in_proj_b, ids_.gdn_proj, b_at, gdn_width, false);
  b.add_tiles(tiles, w.in_proj_a, ids_.gdn_proj, a_at, gdn_width, false);
  int32_t in_proj = b.projection(
      tag + "norm>qkvzba",
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, lw.input_layernorm.data(),
                              static_cast<float>(c.rms_norm_eps)),
      std::move(tiles), {b.all(residual)});

  program::DeltaNetOperands op{.in = ids_.gdn_proj,
                               .out = ids_.gdn_core,
                               .in_stride = gdn_width,
                               .out_stride = c.value_dim(),
                               .key_heads = c.linear_num_key_heads,
                               .value_heads = nv,
                               .key_dim = c.linear_key_head_dim,
                               .value_dim = c.linear_value_head_dim,
                               .conv_kernel = c.linear_conv_kernel,
                               .conv_weight = w.conv1d.data(),
                               .decay_factor = w.decay_factor.data(),
                               .dt_bias = w.dt_bias.data(),
                               .norm = w.norm.data(),
                               .norm_eps = static_cast<float>(c.rms_norm_eps),
                               .state_slot = ordinal,
                               .tiled_value_heads = c.value_heads_tiled,
                               .conv_activation = c.hidden_act};
  if (mode_ == RowMode::kVerify) {
    DeltaNetSnapshots& snaps = snapshots_[size(ordinal)];
    snaps.conv = ZeroedArray<float>(size((max_rows_ + 1) * op.conv_state_floats()));
    snaps.recurrent = ZeroedArray<float>(size((max_rows_ + 1) * op.recurrent_floats()));
    op.snapshot_conv = snaps.conv.data();
    op.snapshot_recurrent = snaps.recurrent.data();
  }
  op.chunk = delta_rule_chunk_;
  delta_net_scratch_ = std::max(delta_net_scratch_, op.scratch_floats(max_rows_));
  int32_t core = b.delta_net(tag + "delta_net", op, in_proj, {});

  std::vector<program::Tile> out;
  b.add_tiles(out, w.out_proj, ids_.hidden, 0, H, true);
  return residual_projection(b, tag + "out", StepBuilder::rows(ids_.gdn_core, c.value_dim()),
                             std::move(out), core);
}

int32_t Qwen38Step::add_attention(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles) {
  const Qwen38Config& c = config_;
  const Qwen38LayerWeights& lw = weights_.layers[size(layer)];
  const Qwen38AttentionWeights& w = lw.attention;
  const int64_t H = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);
  const bool prefill = mode_ == RowMode::kPrefill;
  const int64_t row_blocks = (max_rows_ + kAttentionRowBlock - 1) / kAttentionRowBlock;

  std::vector<program::Tile> tiles;
  for (auto [matrix, bias, out, width] : {std::tuple{&w.q_proj, &w.q_bias, ids_.q, c.q_proj_dim()},
                                          {&w.k_proj, &w.k_bias, ids_.k, c.kv_dim()},
                                          {&w.v_proj, &w.v_bias, ids_.v, c.kv_dim()}}) {
    const std::size_t first = tiles.size();
    b.add_tiles(tiles, *matrix, out, 0, width, false);
    with_bias(tiles, *bias, first);
  }
  int32_t qkv = b.projection(
      tag + "norm>qkv",
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, lw.input_layernorm.data(), eps),
      std::move(tiles), {b.all(residual)});

  // Gated attention: each query head is [q | gate]; q and k get an RMSNorm (scale 1 + w) before
  // RoPE.
  const program::AttentionOperands op{.q = ids_.q,
                                      .k = ids_.k,
                                      .v = ids_.v,
                                      .out = ids_.attended,
                                      .q_stride = c.q_proj_dim(),
                                      .kv_stride = c.kv_dim(),
                                      .out_stride = c.attn_output_dim(),
                                      .heads = c.num_attention_heads,
                                      .kv_heads = c.num_key_value_heads,
                                      .head_dim = c.head_dim,
                                      .output_gate = true,
                                      .q_norm = w.q_norm.data(),
                                      .k_norm = w.k_norm.data(),
                                      .norm_eps = eps,
                                      .angles = ids_.angles,
                                      .rope = &rope_,
                                      .cache_slot = c.full_attention_ordinal(layer),
                                      .row_block = prefill ? kAttentionRowBlock : 0,
                                      .row_blocks = prefill ? row_blocks : 0};
  int32_t attended = b.attention(tag + "attention", op, qkv, {b.all(angles)});

  std::vector<program::Tile> out;
  b.add_tiles(out, w.o_proj, ids_.hidden, 0, H, true);
  with_bias(out, w.o_bias);
  return residual_projection(b, tag + "o", StepBuilder::rows(ids_.attended, c.attn_output_dim()),
                             std::move(out), attended);
}

int32_t Qwen38Step::add_mlp(StepBuilder& b, int64_t layer, int32_t residual) {
  const Qwen38Config& c = config_;
  const Qwen38LayerWeights& lw = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const std::string tag = fmt::format("L{}.", layer);
  int32_t gate_up =
      b.gate_up_silu(tag + "norm>gate|up+silu",
                     StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain,
                                             lw.post_attention_layernorm.data(),
                                             static_cast<float>(c.rms_norm_eps)),
                     lw.gate_proj, lw.up_proj, ids_.gate, ids_.up, {b.all(residual)}, c.hidden_act);
  std::vector<program::Tile> down;
  b.add_tiles(down, lw.down_proj, ids_.hidden, 0, H, true);
  // A tapped layer's down tiles also copy the finished residual columns out for the drafter.
  if (const int64_t slot = tap_slot(layer); slot >= 0) {
    for (program::Tile& tile : down) {
      tile.copy_to = ids_.taps;
      tile.copy_offset = slot * H;
      tile.copy_stride = static_cast<int64_t>(tap_layers_.size()) * H;
    }
  }
  return residual_projection(b, tag + "down", StepBuilder::rows(ids_.gate, I), std::move(down),
                             gate_up);
}

void Qwen38Step::experts_run(std::vector<int64_t>& out) const {
  out.clear();
  for (const auto& plan : moe_plans_) out.push_back(plan->used);
}

int64_t Qwen38Step::moe_slots() const {
  return std::min(config_.moe.experts, max_rows_ * config_.moe.experts_per_token);
}

int64_t Qwen38Step::tap_slot(int64_t layer) const {
  auto tapped = std::find(tap_layers_.begin(), tap_layers_.end(), layer);
  return tapped == tap_layers_.end() ? -1 : tapped - tap_layers_.begin();
}

int32_t Qwen38Step::add_moe(StepBuilder& b, int64_t layer, int32_t residual) {
  const Qwen38Config& c = config_;
  const Qwen38LayerWeights& lw = weights_.layers[size(layer)];
  const Qwen38MoeWeights& w = lw.moe;
  const int64_t H = c.hidden_size, E = c.moe.experts;
  const std::string tag = fmt::format("L{}.", layer);
  const program::RowInput normed = StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain,
                                                           lw.post_attention_layernorm.data(),
                                                           static_cast<float>(c.rms_norm_eps));

  // The router and the shared expert's gate share one pass of normalised rows, which the routed
  // experts read too (published).
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.router, ids_.router, 0, E + 1, false);
  b.add_tiles(tiles, w.shared_expert_gate, ids_.router, E, E + 1, false);
  program::RowInput router_input = normed;
  router_input.publish = ids_.moe_in;
  const int32_t router = b.projection(tag + "norm>router|shared_gate", router_input,
                                      std::move(tiles), {b.all(residual)});
  const int32_t shared =
      b.gate_up_silu(tag + "norm>shared_gate|up+silu", normed, w.shared_gate_proj, w.shared_up_proj,
                     ids_.gate, ids_.up, {b.all(residual)}, c.hidden_act);

  moe_plans_.push_back(
      std::make_unique<program::MoePlan>(moe_slots(), max_rows_, c.moe.experts_per_token));
  const program::MoeRouteOperands route{.logits = ids_.router,
                                        .stride = E + 1,
                                        .experts = E,
                                        .experts_per_token = c.moe.experts_per_token,
                                        .shared_gate_column = E,
                                        .plan = moe_plans_.back().get()};
  const program::MoeExpertsOperands experts{.input = ids_.moe_in,
                                            .hidden = H,
                                            .experts = &w.experts,
                                            .intermediate = c.moe.intermediate,
                                            .act = ids_.expert_act,
                                            .activation = c.hidden_act};
  program::MoeDownOperands down{.experts = &w.experts,
                                .act = ids_.expert_act,
                                .intermediate = c.moe.intermediate,
                                .shared_down = w.shared_down_proj,
                                .shared_act = ids_.gate,
                                .out = ids_.hidden,
                                .hidden = H,
                                .out_stride = H};
  if (const int64_t slot = tap_slot(layer); slot >= 0) {
    down.copy_to = ids_.taps;
    down.copy_offset = slot * H;
    down.copy_stride = static_cast<int64_t>(tap_layers_.size()) * H;
  }
  // Expert parallelism: the ranks' partial sums (their experts and shared-expert columns) are
  // added into the residual stream by one all-reduce.
  return b.moe(tag + "moe", route, experts, down, router, shared, rank_->ranks(), ids_.partial);
}

void Qwen38Step::prepare(std::span<Qwen38State* const> states, std::span<const int32_t> tokens,
                         float* logits) {
  check_logits_target(mode_, logits);
  // The rows' states are kept (states_) only once every row passed: commit() finds the step by
  // its last state. Both lists keep their storage between runs (no allocation per step).
  std::vector<program::StepRow>& step_rows = step_rows_;
  std::vector<Qwen38State*>& row_states = row_states_;
  step_rows.resize(size(max_rows_));
  row_states.resize(size(max_rows_));
  const int64_t rows =
      lay_out_step_rows(mode_, max_rows_, states, tokens, std::span<program::StepRow>(step_rows),
                        std::span<Qwen38State*>(row_states));
  const bool verify = mode_ != RowMode::kIndependent;
  for (int64_t r = 0; r < rows; ++r) {
    const program::StepRow& row = step_rows[static_cast<std::size_t>(r)];
    if (row.token < 0 || row.token >= vocab_)
      fail("token id {} is outside the vocabulary (0..{})", row.token, vocab_ - 1);
    const Qwen38State* state = row_states[static_cast<std::size_t>(r)];
    if (row.position >= state->capacity() || row.position >= max_context_) {
      fail("context full: position {} is outside the context of {} tokens", row.position,
           state->capacity());
    }
    for (int64_t s = 0; s < r && !verify; ++s) {
      if (row_states[static_cast<std::size_t>(s)] == state) {
        fail("independent rows {} and {} are the same sequence", s, r);
      }
    }
  }
  states_.assign(row_states.begin(), row_states.begin() + rows);
  program_->set_rows(std::span(step_rows).first(static_cast<std::size_t>(rows)));
  program_->rebind(ids_.logits, logits != nullptr ? logits : logits_.data());
  verify_start_ = states[0]->position();
}

void Qwen38Step::finish() {
  if (mode_ != RowMode::kIndependent) {
    states_[0]->advance(rows());
    return;
  }
  for (int64_t r = 0; r < rows(); ++r) states_[static_cast<std::size_t>(r)]->advance(1);
}

void Qwen38Step::commit(Qwen38State& state, int64_t rows_kept) {
  if (mode_ != RowMode::kVerify) fail("commit needs a verify step");
  if (&state != last_state() || rows_kept < 0 || rows_kept > rows()) {
    fail("commit of {} rows does not match the last verify run ({} rows)", rows_kept, rows());
  }
  for (std::size_t ordinal = 0; ordinal < snapshots_.size(); ++ordinal) {
    const DeltaNetSnapshots& snaps = snapshots_[ordinal];
    Qwen38GdnState& live = state.gdn(static_cast<int64_t>(ordinal));
    std::memcpy(live.conv.data(), snaps.conv.data() + size(rows_kept) * live.conv.size(),
                live.conv.bytes());
    std::memcpy(live.recurrent.data(),
                snaps.recurrent.data() + size(rows_kept) * live.recurrent.size(),
                live.recurrent.bytes());
  }
  state.set_position(verify_start_ + rows_kept);
}

}  // namespace md
