#include "models/musespark/musespark_step.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "base/error.h"
#include "models/common/step_builder.h"
#include "models/common/step_rows.h"
#include "models/musespark/musespark_routing.h"

namespace md {

namespace {

using program::NormKind;

// lm_head tiles are at least this large: the per-tile argmax results stay few.
constexpr int64_t kMinVocabTile = 256;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

MuseStep::MuseStep(const MuseSparkConfig& config, const MuseSparkWeights& weights,
                   const std::vector<kernels::ExpertMatrices>& experts, const kernels::Rope& rope,
                   int64_t max_rows, RowMode mode, int workers, std::vector<int64_t> tap_layers,
                   LogitRows logits, dist::Communicator* ranks)
    : config_(config),
      weights_(weights),
      experts_(experts),
      rope_(rope),
      max_rows_(max_rows),
      mode_(mode),
      logit_rows_(mode == RowMode::kPrefill ? logits : LogitRows::kAll),
      tap_layers_(std::move(tap_layers)) {
  const int64_t most = mode == RowMode::kPrefill ? kMaxPrefillRows : kMaxRows;
  if (max_rows < 1 || max_rows > most) fail("a step takes 1..{} rows, not {}", most, max_rows);
  build(workers, ranks);
}

int64_t MuseStep::moe_slots() const {
  return std::min(config_.num_experts, max_rows_ * config_.num_experts_per_token);
}

int64_t MuseStep::tap_slot(int64_t layer) const {
  auto tapped = std::find(tap_layers_.begin(), tap_layers_.end(), layer);
  return tapped == tap_layers_.end() ? -1 : tapped - tap_layers_.begin();
}

void MuseStep::build(int workers, dist::Communicator* ranks) {
  const MuseSparkConfig& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size, hm = c.moe_hidden_size;
  const auto n_taps = static_cast<int64_t>(tap_layers_.size());
  for (auto [storage, width] : {std::pair{&stream_, H},
                                {&q_, c.q_dim()},
                                {&k_, c.kv_dim()},
                                {&v_, c.kv_dim()},
                                {&gate_, c.q_dim()},
                                {&attended_, c.q_dim()},
                                {&branch_, H},
                                {&latent_, hm},
                                {&router_, c.num_experts},
                                {&mixed_, hm},
                                {&angles_, c.head_dim},
                                // Prefill writes the caller's logits (prepare() rebinds them).
                                {&logits_, mode_ == RowMode::kPrefill ? 0 : c.vocab_size},
                                {&taps_, n_taps * H}}) {
    storage->assign(size(R * width), 0.0f);
  }
  // The lm_head reads every row, or the last one only.
  const bool last_only = logit_rows_ == LogitRows::kLast;
  const int64_t logit_rows = last_only ? 1 : R;
  greedy_.assign(size(logit_rows), 0);
  states_.assign(size(R), nullptr);
  step_rows_.assign(size(R), {});
  // One entry per (expert, row) pair a step can have (program::MoePlan).
  const int64_t entries = R * c.num_experts_per_token;
  expert_act_.assign(size(entries * c.moe_intermediate_size), 0.0f);
  expert_each_.assign(size(entries * hm), 0.0f);
  rank_ = std::make_unique<RankBuffers>(ranks, R, H, logit_rows, c.vocab_size, hm);
  StepBuilder b(workers);
  ids_ = {b.buffer(stream_),
          b.buffer(q_),
          b.buffer(k_),
          b.buffer(v_),
          b.buffer(gate_),
          b.buffer(attended_),
          b.buffer(branch_),
          b.buffer(latent_),
          b.buffer(router_),
          b.buffer(expert_act_),
          b.buffer(expert_each_),
          b.buffer(mixed_),
          b.buffer(angles_),
          b.buffer(logits_),
          b.buffer(taps_),
          b.buffer(rank_->partial),
          b.buffer(rank_->local_logits),
          b.buffer(rank_->expert_mix)};

  // §4.1: the embedding row normed without a weight is the stream.
  const int32_t embed =
      b.add({"embed", R, program::EmbedOperands{weights_.embed_tokens, ids_.stream}, {}, {}});
  int32_t residual = b.add({"embed_norm",
                            R,
                            program::NormRowsOperands{.buffer = ids_.stream,
                                                      .stride = H,
                                                      .norm = NormKind::kUnweighted,
                                                      .eps = static_cast<float>(c.rms_norm_eps)},
                            {b.all(embed)},
                            {}});
  const int32_t angles =
      b.add({"rope_angles", R, program::RopeOperands{&rope_, ids_.angles}, {}, {}});
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    residual = add_attention(b, layer, residual, angles);
    residual = add_moe(b, layer, residual);
  }
  program::RowInput final_rows =
      StepBuilder::normalised(ids_.stream, H, NormKind::kF32Plain, weights_.final_norm.data(),
                              static_cast<float>(c.rms_norm_eps));
  if (last_only) final_rows.first_row = -1;
  // The untrained tail in the ids of the rank's part of the vocabulary (all of it on one rank).
  int64_t valid = c.vocab_used;
  if (rank_->ranks() != nullptr) {
    const dist::Range mine =
        dist::even_part(c.vocab_size, rank_->ranks()->size(), rank_->ranks()->rank());
    valid = std::clamp(c.vocab_used - mine.begin, int64_t{0}, mine.size());
  }
  b.lm_head_argmax(final_rows, weights_.lm_head, ids_.logits, kMinVocabTile, tile_max_, tile_arg_,
                   greedy_.data(), {b.all(residual)},
                   {static_cast<float>(c.final_logit_softcapping),
                    static_cast<float>(c.output_multiplier), valid},
                   logit_rows, rank_->vocab_shard(ids_.local_logits, ids_.logits));
  program_ = b.build(0, max_rows_);
}

int32_t MuseStep::add_attention(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles) {
  const MuseSparkConfig& c = config_;
  const MuseLayerWeights& w = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size, hd = c.head_dim, group = c.gqa_group();
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);

  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.q_proj, ids_.q, 0, c.q_dim(), false);
  b.add_tiles(tiles, w.k_proj, ids_.k, 0, c.kv_dim(), false);
  b.add_tiles(tiles, w.v_proj, ids_.v, 0, c.kv_dim(), false);
  b.add_tiles(tiles, w.gate_proj, ids_.gate, 0, c.q_dim(), false);
  const int32_t qkvg = b.projection(
      tag + "norm>q|k|v|gate",
      StepBuilder::normalised(ids_.stream, H, NormKind::kF32Plain, w.input_norm.data(), eps),
      std::move(tiles), {b.all(residual)});

  // §4.2: RoPE on the sliding layers only; the window's ring or every position.
  const bool rope = c.uses_rope(layer);
  const program::RowAttentionOperands op{
      .q = ids_.q,
      .k = ids_.k,
      .v = ids_.v,
      .gate = ids_.gate,
      .out = ids_.attended,
      .q_stride = c.q_dim(),
      .kv_stride = c.kv_dim(),
      .heads = c.num_attention_heads,
      .kv_heads = c.num_key_value_heads,
      .head_dim = hd,
      .window = c.is_full_attention(layer) ? 0 : c.sliding_window,
      .norm_eps = eps,
      .q_scale = static_cast<float>(c.qk_scale_factor),
      .angles = rope ? ids_.angles : program::kNoBuffer,
      .rope = rope ? &rope_ : nullptr,
      .layer = layer};
  // KV head g reads its key and value columns and its group's query and gate columns.
  std::vector<std::vector<program::Dependency>> head_waits;
  for (int64_t g = 0; g < c.num_key_value_heads; ++g) {
    std::vector<program::Dependency> reads;
    for (auto [buffer, first, count] : {std::tuple{ids_.q, g * group * hd, group * hd},
                                        {ids_.gate, g * group * hd, group * hd},
                                        {ids_.k, g * hd, hd},
                                        {ids_.v, g * hd, hd}}) {
      auto writing = b.tiles_writing(qkvg, buffer, first, first + count);
      reads.insert(reads.end(), writing.begin(), writing.end());
    }
    head_waits.push_back(std::move(reads));
  }
  std::vector<program::Dependency> waits;
  if (rope) waits.push_back(b.all(angles));
  const int32_t attended = b.add(
      {tag + "attention", c.num_key_value_heads, op, std::move(waits), std::move(head_waits)});

  std::vector<program::Tile> out;
  b.add_tiles(out, w.o_proj, ids_.branch, 0, H, false);
  const int32_t o =
      b.summed_projection(tag + "o", StepBuilder::rows(ids_.attended, c.q_dim()), std::move(out),
                          {b.all(attended)}, rank_->ranks(), ids_.partial);
  return b.add({tag + "attention_join",
                max_rows_,
                program::GatedResidualOperands{.branch = ids_.branch,
                                               .stream = ids_.stream,
                                               .width = H,
                                               .eps = static_cast<float>(c.post_norm_eps),
                                               .alpha = w.attention_gate.alpha.data(),
                                               .beta = w.attention_gate.beta.data()},
                {b.all(o)},
                {}});
}

int32_t MuseStep::add_moe(StepBuilder& b, int64_t layer, int32_t residual) {
  const MuseSparkConfig& c = config_;
  const MuseLayerWeights& w = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size, hm = c.moe_hidden_size, E = c.num_experts;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto post_eps = static_cast<float>(c.post_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);

  // §4.4: the pre-FFN normed rows go to the latent projection and to the router in one pass.
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, w.pre_expert_proj, ids_.latent, 0, hm, false);
  b.add_tiles(tiles, muse_router_matrix(w, c), ids_.router, 0, E, false);
  const int32_t pre = b.projection(
      tag + "norm>latent|router",
      StepBuilder::normalised(ids_.stream, H, NormKind::kF32Plain, w.pre_ffn_norm.data(), eps),
      std::move(tiles), {b.all(residual)});
  const int32_t latent_norm =
      b.add({tag + "latent_norm",
             max_rows_,
             program::NormRowsOperands{.buffer = ids_.latent,
                                       .stride = hm,
                                       .norm = NormKind::kF32Plain,
                                       .norm_weight = w.pre_expert_norm.data(),
                                       .eps = eps},
             b.tiles_writing(pre, ids_.latent, 0, hm),
             {}});

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
                                        .multiplier = static_cast<float>(c.output_multiplier),
                                        .sum_epsilon = kMuseRouterSumEpsilon};
  const program::MoeExpertsOperands experts{.input = ids_.latent,
                                            .hidden = hm,
                                            .experts = &experts_[size(layer)],
                                            .intermediate = c.moe_intermediate_size,
                                            .act = ids_.expert_act};
  program::MoeDownOperands down;
  down.experts = &experts_[size(layer)];
  down.act = ids_.expert_act;
  down.intermediate = c.moe_intermediate_size;
  down.hidden = hm;
  down.each = ids_.expert_each;
  const program::MoeMixOperands mix{.each = ids_.expert_each,
                                    .out = ids_.mixed,
                                    .width = hm,
                                    .experts_per_token = c.num_experts_per_token,
                                    .scale = w.post_expert_norm.data(),
                                    .eps = post_eps};
  // Expert parallelism: the ranks' partial mixes are summed before the post projection.
  const int32_t mixed = b.moe_mixed(tag + "moe", route, experts, down, mix, max_rows_,
                                    b.tiles_writing(pre, ids_.router, 0, E), {b.all(latent_norm)},
                                    rank_->ranks(), ids_.expert_mix);

  std::vector<program::Tile> out;
  b.add_tiles(out, w.post_expert_proj, ids_.branch, 0, H, false);
  const int32_t post = b.projection(tag + "post_expert", StepBuilder::rows(ids_.mixed, hm),
                                    std::move(out), {b.all(mixed)});
  program::GatedResidualOperands join{.branch = ids_.branch,
                                      .stream = ids_.stream,
                                      .width = H,
                                      .scale = w.post_ffn_norm.data(),
                                      .eps = post_eps,
                                      .alpha = w.ffn_gate.alpha.data(),
                                      .beta = w.ffn_gate.beta.data()};
  if (const int64_t slot = tap_slot(layer); slot >= 0) {
    join.copy_to = ids_.taps;
    join.copy_offset = slot * H;
    join.copy_stride = static_cast<int64_t>(tap_layers_.size()) * H;
  }
  return b.add({tag + "ffn_join", max_rows_, join, {b.all(post)}, {}});
}

void MuseStep::experts_run(std::vector<int64_t>& out) const {
  out.clear();
  for (const auto& plan : moe_plans_) out.push_back(plan->used);
}

void MuseStep::prepare(std::span<MuseSparkState* const> states, std::span<const int32_t> tokens,
                       float* logits) {
  check_logits_target(mode_, logits);
  std::vector<program::StepRow>& step_rows = step_rows_;
  const int64_t rows =
      lay_out_step_rows(mode_, max_rows_, states, tokens, std::span<program::StepRow>(step_rows),
                        std::span<MuseSparkState*>(states_));
  // Room for each row's keys in every layer now: the attention tasks write heads of a row at
  // once and must not grow the storage under each other.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      states_[size(r)]->layer(l).reserve(step_rows[size(r)].position);
    }
  }
  program_->set_rows(std::span(step_rows).first(size(rows)));
  program_->rebind(ids_.logits, logits != nullptr ? logits : logits_.data());
}

void MuseStep::finish() {
  if (mode_ != RowMode::kIndependent) {
    // Verify rows are held until commit; a prompt's are committed at once.
    states_[0]->advance(rows());
    states_[0]->hold_verified(mode_ == RowMode::kVerify ? rows() : 0);
    return;
  }
  for (int64_t r = 0; r < rows(); ++r) {
    states_[size(r)]->advance(1);
    states_[size(r)]->hold_verified(0);
  }
}

}  // namespace md
