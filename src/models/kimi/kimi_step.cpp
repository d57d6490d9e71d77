#include "models/kimi/kimi_step.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/residual_mix.h"
#include "models/common/step_builder.h"
#include "models/common/step_rows.h"
#include "program/cpu_residual_mix.h"

namespace md {

namespace {

using program::Dependency;
using program::NormKind;
using program::PrefixUpdate;

// lm_head tiles are at least this large: the per-tile argmax results stay few.
constexpr int64_t kMinVocabTile = 256;
// KDA's output norm eps (§6.2 step 5; fixed, not rms_norm_eps).
constexpr float kKdaOutputNormEps = 1e-5f;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

kernels::GatedActivation situ(const KimiK3Config& c) {
  return kernels::GatedActivation::siTU(
      {static_cast<float>(c.situ_beta), static_cast<float>(c.situ_linear_beta)});
}

void append(std::vector<Dependency>& to, const std::vector<Dependency>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

}  // namespace

KimiStep::KimiStep(const KimiK3Config& config, const KimiK3Weights& weights,
                   const KimiReference& reference, int64_t max_rows, RowMode mode, int workers,
                   std::vector<int64_t> tap_layers, LogitRows logits, dist::Communicator* ranks)
    : config_(config),
      weights_(weights),
      reference_(reference),
      max_rows_(max_rows),
      mode_(mode),
      logit_rows_(mode == RowMode::kPrefill ? logits : LogitRows::kAll),
      tap_layers_(std::move(tap_layers)) {
  const int64_t most = mode == RowMode::kPrefill ? kMaxPrefillRows : kMaxRows;
  if (max_rows < 1 || max_rows > most) fail("a step takes 1..{} rows, not {}", most, max_rows);
  if (config.num_residual_blocks() + 1 > program::kMaxResidualCandidates) {
    fail("kimi_k3: {} attention-residual blocks exceed the fused step's {}",
         config.num_residual_blocks(), program::kMaxResidualCandidates - 1);
  }
  build(workers, ranks);
}

int64_t KimiStep::moe_slots() const {
  return std::min(config_.num_experts, max_rows_ * config_.num_experts_per_token);
}

// The rank's share of the shared experts (KimiShard: not the config's).
int64_t KimiStep::shared_width() const {
  const int64_t first_moe = config_.first_k_dense_replace;
  return first_moe < config_.num_layers ? weights_.layers[size(first_moe)].moe.shared_gate.rows : 0;
}

int64_t KimiStep::tap_slot(int64_t layer) const {
  auto tapped = std::find(tap_layers_.begin(), tap_layers_.end(), layer);
  return tapped == tap_layers_.end() ? -1 : tapped - tap_layers_.begin();
}

void KimiStep::build(int workers, dist::Communicator* ranks) {
  const KimiK3Config& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size, C = c.kda_channels();
  int64_t fa_rank = 0;  // the decay's low rank (the widest, should layers differ)
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.layer_kind(l) == KimiLayerKind::kKda) {
      fa_rank = std::max(fa_rank, weights_.layers[size(l)].kda.f_a_proj.rows);
    }
  }
  const int64_t qk = c.mla_qk_head_dim(), heads = c.num_attention_heads;
  const int64_t shared_i = c.num_shared_experts > 0 ? shared_width() : 0;
  const auto n_taps = static_cast<int64_t>(tap_layers_.size());
  for (auto [storage, width] : {std::pair{&stream_, H},
                                {&sub_, H},
                                {&mixed_, H},
                                {&kda_in_, 5 * C + c.kda_num_heads},
                                {&fa_, fa_rank},
                                {&kda_out_, C},
                                {&cq_, c.q_lora_rank},
                                {&q_, heads * qk},
                                {&ckv_, c.mla_latent_cache_width()},
                                {&mla_gate_, heads * c.v_head_dim},
                                {&mla_out_, heads * c.v_head_dim},
                                {&act_, c.intermediate_size},
                                {&up_, c.intermediate_size},
                                {&shared_act_, shared_i},
                                {&shared_up_, shared_i},
                                {&router_, c.num_experts},
                                {&latent_, c.routed_expert_hidden_size},
                                {&moe_mixed_, c.routed_expert_hidden_size},
                                // Prefill writes the caller's logits (prepare() rebinds them).
                                {&logits_, mode_ == RowMode::kPrefill ? 0 : c.vocab_size},
                                {&taps_, n_taps * H}}) {
    storage->assign(size(R * width), 0.0f);
  }
  blocks_.assign(size(c.num_residual_blocks() * R * H), 0.0f);
  // One entry per (expert, row) pair a step can have (program::MoePlan).
  const int64_t entries = R * c.num_experts_per_token;
  expert_act_.assign(size(entries * c.moe_intermediate_size), 0.0f);
  expert_each_.assign(size(entries * c.routed_expert_hidden_size), 0.0f);
  // The lm_head reads every row, or the last one only.
  const bool last_only = logit_rows_ == LogitRows::kLast;
  const int64_t logit_rows = last_only ? 1 : R;
  greedy_.assign(size(logit_rows), 0);
  rank_ = std::make_unique<RankBuffers>(ranks, R, H, logit_rows, c.vocab_size,
                                        c.routed_expert_hidden_size);
  states_.assign(size(R), nullptr);
  step_rows_.assign(size(R), {});
  StepBuilder b(workers);
  ids_ = {b.buffer(stream_),
          b.buffer(sub_),
          b.buffer(mixed_),
          b.buffer(blocks_),
          b.buffer(kda_in_),
          b.buffer(fa_),
          b.buffer(kda_out_),
          b.buffer(cq_),
          b.buffer(q_),
          b.buffer(ckv_),
          b.buffer(mla_gate_),
          b.buffer(mla_out_),
          b.buffer(act_),
          b.buffer(up_),
          b.buffer(shared_act_),
          b.buffer(shared_up_),
          b.buffer(router_),
          b.buffer(latent_),
          b.buffer(expert_act_),
          b.buffer(expert_each_),
          b.buffer(moe_mixed_),
          b.buffer(logits_),
          b.buffer(taps_),
          b.buffer(rank_->partial),
          b.buffer(rank_->local_logits),
          b.buffer(rank_->expert_mix)};

  const int32_t embed =
      b.add({"embed", R, program::EmbedOperands{weights_.embed_tokens, ids_.stream}, {}, {}});
  std::vector<Dependency> sub_ready = {b.all(embed)};
  const int64_t B = c.attn_res_block_size;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const KimiLayerWeights& w = weights_.layers[size(l)];
    const std::string tag = fmt::format("L{}.", l);
    // §5.2: the previous FFN's output joins the prefix; the attention mix; a new block begins
    // with the prefix as it was.
    const bool fresh = kernels::pushes_block(l, B);
    const int32_t attention_mix =
        add_mix(b, tag + "attention_mix", l == 0 ? PrefixUpdate::kNone : PrefixUpdate::kAdd,
                std::move(sub_ready), kernels::attention_mix_blocks(l, B), fresh ? l / B : -1,
                w.attention_mix, l - 1);
    const int32_t attention = c.layer_kind(l) == KimiLayerKind::kKda ? add_kda(b, l, attention_mix)
                                                                     : add_mla(b, l, attention_mix);
    const int32_t mlp_mix =
        add_mix(b, tag + "mlp_mix", fresh ? PrefixUpdate::kReplace : PrefixUpdate::kAdd,
                {b.all(attention)}, kernels::mlp_mix_blocks(l, B), -1, w.mlp_mix, -1);
    sub_ready = add_ffn(b, l, mlp_mix);
  }
  const int32_t output_mix = add_mix(b, "output_mix", PrefixUpdate::kAdd, std::move(sub_ready),
                                     kernels::final_mix_blocks(c.num_layers, B), -1,
                                     weights_.output_mix, c.num_layers - 1);
  program::RowInput final_rows =
      StepBuilder::normalised(ids_.mixed, H, NormKind::kF32Plain, weights_.final_norm.data(),
                              static_cast<float>(c.rms_norm_eps));
  if (last_only) final_rows.first_row = -1;
  b.lm_head_argmax(final_rows, weights_.lm_head, ids_.logits, kMinVocabTile, tile_max_, tile_arg_,
                   greedy_.data(), {b.all(output_mix)}, {}, logit_rows,
                   rank_->vocab_shard(ids_.local_logits, ids_.logits));
  program_ = b.build(0, max_rows_);
}

int32_t KimiStep::add_mix(StepBuilder& b, std::string name, PrefixUpdate update,
                          std::vector<Dependency> waits, int64_t blocks, int64_t push_to,
                          const std::vector<float>& weight, int64_t tapped_layer) {
  program::ResidualMixOperands op{.prefix = ids_.stream,
                                  .sub = ids_.sub,
                                  .blocks = ids_.blocks,
                                  .out = ids_.mixed,
                                  .width = config_.hidden_size,
                                  .block_rows = max_rows_,
                                  .block_count = blocks,
                                  .push_to = push_to,
                                  .update = update,
                                  .weight = weight.data(),
                                  .eps = static_cast<float>(config_.rms_norm_eps)};
  if (const int64_t slot = tapped_layer >= 0 ? tap_slot(tapped_layer) : -1; slot >= 0) {
    op.copy_to = ids_.taps;
    op.copy_offset = slot * config_.hidden_size;
    op.copy_stride = static_cast<int64_t>(tap_layers_.size()) * config_.hidden_size;
  }
  b.need_scratch(op.scratch_floats());
  return b.add({std::move(name), max_rows_, op, std::move(waits), {}});
}

// §6.2: the input norm fused into q|k|v|f_a|b|gate, f_b after f_a, a kda task per head, o.
int32_t KimiStep::add_kda(StepBuilder& b, int64_t layer, int32_t mix) {
  const KimiK3Config& c = config_;
  const KimiLayerWeights& lw = weights_.layers[size(layer)];
  const KimiKdaWeights& w = lw.kda;
  const int64_t H = c.hidden_size, C = c.kda_channels(), d = c.kda_head_dim;
  const program::KdaOperands op{
      .in = ids_.kda_in,
      .out = ids_.kda_out,
      .in_stride = 5 * C + c.kda_num_heads,
      .out_stride = C,
      .heads = c.kda_num_heads,
      .head_dim = d,
      .conv_kernel = c.short_conv_kernel,
      .conv_weight = {w.q_conv.data(), w.k_conv.data(), w.v_conv.data()},
      .exp_a_log = w.exp_a_log.data(),
      .dt_bias = w.dt_bias.data(),
      .lower_bound = static_cast<float>(c.gate_lower_bound),
      .norm = w.o_norm.data(),
      .norm_eps = kKdaOutputNormEps,
      .state_slot = c.kda_slot(layer),
      .snapshots = mode_ == RowMode::kVerify,
      .chunk = mode_ == RowMode::kPrefill ? reference_.options().kda_chunk : 0};
  const std::string tag = fmt::format("L{}.", layer);
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.q_proj, ids_.kda_in, 0, op.in_stride, false);
  b.add_tiles(tiles, w.k_proj, ids_.kda_in, C, op.in_stride, false);
  b.add_tiles(tiles, w.v_proj, ids_.kda_in, 2 * C, op.in_stride, false);
  b.add_tiles(tiles, lw.g_proj, ids_.kda_in, op.gate_offset(), op.in_stride, false);
  b.add_tiles(tiles, w.b_proj, ids_.kda_in, op.b_offset(), op.in_stride, false);
  b.add_tiles(tiles, w.f_a_proj, ids_.fa, 0, w.f_a_proj.rows, false);
  const int32_t in =
      b.projection(tag + "norm>q|k|v|gate|b|f_a",
                   StepBuilder::normalised(ids_.mixed, H, NormKind::kF32Plain, lw.input_norm.data(),
                                           static_cast<float>(c.rms_norm_eps)),
                   std::move(tiles), {b.all(mix)});
  std::vector<program::Tile> f_tiles;
  b.add_tiles(f_tiles, w.f_b_proj, ids_.kda_in, op.f_offset(), op.in_stride, false);
  const int32_t f =
      b.projection(tag + "f_b", StepBuilder::rows(ids_.fa, w.f_a_proj.rows), std::move(f_tiles),
                   b.tiles_writing(in, ids_.fa, 0, w.f_a_proj.rows));
  // Head h reads its channels of q, k, v, gate and f and its β logit.
  std::vector<std::vector<Dependency>> head_waits;
  for (int64_t h = 0; h < c.kda_num_heads; ++h) {
    std::vector<Dependency> reads;
    for (const int64_t offset : {int64_t{0}, C, 2 * C, op.gate_offset()}) {
      append(reads, b.tiles_writing(in, ids_.kda_in, offset + h * d, offset + (h + 1) * d));
    }
    append(reads, b.tiles_writing(in, ids_.kda_in, op.b_offset() + h, op.b_offset() + h + 1));
    append(reads,
           b.tiles_writing(f, ids_.kda_in, op.f_offset() + h * d, op.f_offset() + (h + 1) * d));
    head_waits.push_back(std::move(reads));
  }
  b.need_scratch(op.scratch_floats(max_rows_));
  const int32_t kda = b.add({tag + "kda", c.kda_num_heads, op, {}, std::move(head_waits)});
  return into_sub(b, tag + "o", StepBuilder::rows(ids_.kda_out, C), lw.o_proj, false, {b.all(kda)});
}

// §7.3: the input norm fused into q_a|kv_a|gate, the q_a norm, q_b, each row's cache entry, a
// latent_attention task per head (its q and gate columns, every row's entry), o.
int32_t KimiStep::add_mla(StepBuilder& b, int64_t layer, int32_t mix) {
  const KimiK3Config& c = config_;
  const KimiLayerWeights& lw = weights_.layers[size(layer)];
  const KimiMlaWeights& w = lw.mla;
  const int64_t H = c.hidden_size, heads = c.num_attention_heads, v = c.v_head_dim;
  const int64_t qk = c.mla_qk_head_dim(), slot = c.mla_slot(layer);
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const program::LatentAttentionOperands op{.q = ids_.q,
                                            .ckv = ids_.ckv,
                                            .gate = ids_.mla_gate,
                                            .out = ids_.mla_out,
                                            .heads = heads,
                                            .nope = c.qk_nope_head_dim,
                                            .shared = c.qk_rope_head_dim,
                                            .rank = c.kv_lora_rank,
                                            .v_head_dim = v,
                                            .latent_norm = w.kv_a_norm.data(),
                                            .norm_eps = eps,
                                            .key_absorb = reference_.key_absorb(slot),
                                            .kv_b = w.kv_b_proj,
                                            .cache_slot = slot};
  const std::string tag = fmt::format("L{}.", layer);
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.q_a_proj, ids_.cq, 0, c.q_lora_rank, false);
  b.add_tiles(tiles, w.kv_a_proj, ids_.ckv, 0, op.ckv_stride(), false);
  b.add_tiles(tiles, lw.g_proj, ids_.mla_gate, 0, op.out_stride(), false);
  const int32_t in = b.projection(
      tag + "norm>q_a|kv_a|gate",
      StepBuilder::normalised(ids_.mixed, H, NormKind::kF32Plain, lw.input_norm.data(), eps),
      std::move(tiles), {b.all(mix)});
  const int32_t q_norm = b.add({tag + "q_a_norm",
                                max_rows_,
                                program::NormRowsOperands{.buffer = ids_.cq,
                                                          .stride = c.q_lora_rank,
                                                          .norm = NormKind::kF32Plain,
                                                          .norm_weight = w.q_a_norm.data(),
                                                          .eps = eps},
                                b.tiles_writing(in, ids_.cq, 0, c.q_lora_rank),
                                {}});
  std::vector<program::Tile> q_tiles;
  b.add_tiles(q_tiles, w.q_b_proj, ids_.q, 0, op.q_stride(), false);
  const int32_t q = b.projection(tag + "q_b", StepBuilder::rows(ids_.cq, c.q_lora_rank),
                                 std::move(q_tiles), {b.all(q_norm)});
  const int32_t entries = b.add({tag + "latent_append",
                                 max_rows_,
                                 program::LatentAppendOperands{op},
                                 b.tiles_writing(in, ids_.ckv, 0, op.ckv_stride()),
                                 {}});
  std::vector<std::vector<Dependency>> head_waits;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<Dependency> reads = b.tiles_writing(q, ids_.q, h * qk, (h + 1) * qk);
    append(reads, b.tiles_writing(in, ids_.mla_gate, h * v, (h + 1) * v));
    head_waits.push_back(std::move(reads));
  }
  b.need_scratch(op.scratch_floats());
  const int32_t attended =
      b.add({tag + "latent_attention", heads, op, {b.all(entries)}, std::move(head_waits)});
  return into_sub(b, tag + "o", StepBuilder::rows(ids_.mla_out, op.out_stride()), lw.o_proj, false,
                  {b.all(attended)});
}

// §8: the dense SiTU MLP, or the latent MoE plus the shared experts, into `sub`.
std::vector<Dependency> KimiStep::add_ffn(StepBuilder& b, int64_t layer, int32_t mix) {
  const KimiK3Config& c = config_;
  const KimiLayerWeights& lw = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size, E = c.num_experts, latent = c.routed_expert_hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);
  const program::RowInput input = StepBuilder::normalised(ids_.mixed, H, NormKind::kF32Plain,
                                                          lw.post_attention_norm.data(), eps);
  if (!c.is_moe_layer(layer)) {
    const int32_t gate_up = b.gate_up_silu(tag + "norm>gate|up+situ", input, lw.dense_gate,
                                           lw.dense_up, ids_.act, ids_.up, {b.all(mix)}, situ(c));
    return {b.all(into_sub(b, tag + "down", StepBuilder::rows(ids_.act, c.intermediate_size),
                           lw.dense_down, false, {b.all(gate_up)}))};
  }
  const KimiMoeWeights& w = lw.moe;
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.router, ids_.router, 0, E, false);
  b.add_tiles(tiles, w.latent_down, ids_.latent, 0, latent, false);
  const int32_t pre =
      b.projection(tag + "norm>router|latent_down", input, std::move(tiles), {b.all(mix)});
  moe_plans_.push_back(
      std::make_unique<program::MoePlan>(moe_slots(), max_rows_, c.num_experts_per_token));
  const program::MoeRouteOperands route{.logits = ids_.router,
                                        .stride = E,
                                        .experts = E,
                                        .experts_per_token = c.num_experts_per_token,
                                        .shared_gate_column = -1,
                                        .plan = moe_plans_.back().get(),
                                        .scoring = program::MoeScoring::kSigmoidBias,
                                        .bias = w.router_bias.data(),
                                        .multiplier = 1.0f,
                                        .sum_epsilon = 0.0f};
  const program::MoeExpertsOperands experts{.input = ids_.latent,
                                            .hidden = latent,
                                            .experts = &w.experts,
                                            .intermediate = c.moe_intermediate_size,
                                            .act = ids_.expert_act,
                                            .activation = situ(c)};
  program::MoeDownOperands down;
  down.experts = &w.experts;
  down.act = ids_.expert_act;
  down.intermediate = c.moe_intermediate_size;
  down.hidden = latent;
  down.each = ids_.expert_each;
  const program::MoeMixOperands mixed{.each = ids_.expert_each,
                                      .out = ids_.moe_mixed,
                                      .width = latent,
                                      .experts_per_token = c.num_experts_per_token,
                                      .normalise = false};
  // The ranks' partial mixes are summed before the latent norm (expert parallelism).
  const int32_t routed = b.moe_mixed(
      tag + "moe", route, experts, down, mixed, max_rows_, b.tiles_writing(pre, ids_.router, 0, E),
      b.tiles_writing(pre, ids_.latent, 0, latent), rank_->ranks(), ids_.expert_mix);
  const int32_t latent_norm = b.add({tag + "latent_norm",
                                     max_rows_,
                                     program::NormRowsOperands{.buffer = ids_.moe_mixed,
                                                               .stride = latent,
                                                               .norm = NormKind::kF32Plain,
                                                               .norm_weight = w.latent_norm.data(),
                                                               .eps = eps},
                                     {b.all(routed)},
                                     {}});
  std::vector<program::Tile> up;
  b.add_tiles(up, w.latent_up, ids_.sub, 0, H, false);
  const int32_t latent_up =
      b.projection(tag + "latent_up", StepBuilder::rows(ids_.moe_mixed, latent), std::move(up),
                   {b.all(latent_norm)});
  if (c.num_shared_experts == 0) return {b.all(latent_up)};
  // The shared experts' sum joins after the routed one (the reference's order of the two adds).
  const int32_t shared_gate_up =
      b.gate_up_silu(tag + "norm>shared_gate|up+situ", input, w.shared_gate, w.shared_up,
                     ids_.shared_act, ids_.shared_up, {b.all(mix)}, situ(c));
  const int32_t shared =
      into_sub(b, tag + "shared_down+sub", StepBuilder::rows(ids_.shared_act, shared_width()),
               w.shared_down, true, {b.all(shared_gate_up), b.all(latent_up)});
  return {b.all(shared)};
}

int32_t KimiStep::into_sub(StepBuilder& b, const std::string& name, program::RowInput input,
                           const kernels::WeightMatrix& w, bool accumulate,
                           std::vector<Dependency> waits) {
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w, ids_.sub, 0, config_.hidden_size, accumulate);
  return b.summed_projection(name, input, std::move(tiles), std::move(waits), rank_->ranks(),
                             ids_.partial);
}

void KimiStep::experts_run(std::vector<int64_t>& out) const {
  out.clear();
  for (const auto& plan : moe_plans_) out.push_back(plan->used);
}

void KimiStep::prepare(std::span<KimiState* const> states, std::span<const int32_t> tokens,
                       float* logits) {
  check_logits_target(mode_, logits);
  std::vector<program::StepRow>& step_rows = step_rows_;
  const int64_t rows =
      lay_out_step_rows(mode_, max_rows_, states, tokens, std::span<program::StepRow>(step_rows),
                        std::span<KimiState*>(states_));
  if (mode_ == RowMode::kVerify) {
    states_[0]->begin_verify_rows(rows);
    states_[0]->reserve_latent_rows(states_[0]->position() + rows);
  } else if (mode_ == RowMode::kPrefill) {
    states_[0]->keep_all();
    states_[0]->reserve_latent_rows(states_[0]->position() + rows);
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      states_[size(r)]->keep_all();
      states_[size(r)]->reserve_latent_rows(states_[size(r)]->position() + 1);
    }
  }
  program_->set_rows(std::span(step_rows).first(size(rows)));
  program_->rebind(ids_.logits, logits != nullptr ? logits : logits_.data());
}

void KimiStep::finish() {
  if (mode_ != RowMode::kIndependent) {
    states_[0]->data().position += rows();
    states_[0]->sync_position();
    if (mode_ == RowMode::kVerify) states_[0]->end_verify(rows());
    return;
  }
  for (int64_t r = 0; r < rows(); ++r) {
    states_[size(r)]->data().position += 1;
    states_[size(r)]->sync_position();
  }
}

}  // namespace md
