// The Muse Spark decode step lowered to one megakernel Program on the shared layer library
// (models/common/step_builder.h): the embedding normed without a weight and the RoPE angles; per
// layer the input norm fused into the q|k|v|gate tiles, attention per KV head over the layer's
// keys (a sliding window's ring with RoPE, or every position without it) with its weightless
// norms and sigmoid output gate, the o tiles, the gated residual join; the pre-FFN norm fused
// into the latent|router tiles, the latent norm, sigmoid routing with the selection bias, each
// chosen expert's gate|up and down once for all rows that chose it (bf16 or NVFP4), each row's
// experts normalised and mixed in router order, the post_expert tiles and the second gated join
// (with the drafter's taps); then the final norm fused into the lm_head tiles, softcapped with the
// untrained tail masked, with per-tile argmax and the reduction. Built once per (rows, row mode)
// and run for every step; the instructions are plain data (no family kernels).
//
// On a tensor-parallel rank (`ranks`; config and weights are the rank's shard,
// musespark_tensor_shard.h) the o tiles write partial products that a kAllReduce sums into the
// branch before the gated join, and the lm_head covers the rank's part of the vocabulary (its
// untrained tail masked in the rank's own ids) with the argmax and logits reduced across the
// ranks; the MoE block routes every row on every rank but runs and mixes only the rank's experts,
// a kAllReduce summing the partial mixes before the post-expert projection.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/moe_routing.h"
#include "kernels/rope.h"
#include "models/common/rank_buffers.h"
#include "models/common/row_mode.h"
#include "models/language_model.h"
#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_state.h"
#include "models/musespark/musespark_weights.h"
#include "program/program.h"

namespace md {

class StepBuilder;

class MuseStep {
 public:
  static constexpr int64_t kMaxRows = program::kMaxStepRows;

  // `experts`: each layer's expert matrices (the model's views). `tap_layers`: layers whose
  // post-layer residual every run copies out for a drafter, [rows][tap_layers.size() · H].
  // Prefill mode (up to kMaxPrefillRows rows): `logits` says which rows go through the lm_head.
  MuseStep(const MuseSparkConfig& config, const MuseSparkWeights& weights,
           const std::vector<kernels::ExpertMatrices>& experts, const kernels::Rope& rope,
           int64_t max_rows, RowMode mode, int workers, std::vector<int64_t> tap_layers = {},
           LogitRows logits = LogitRows::kAll, dist::Communicator* ranks = nullptr);

  program::Program& program() { return *program_; }
  int64_t max_rows() const { return max_rows_; }
  RowMode mode() const { return mode_; }
  LogitRows logit_rows() const { return logit_rows_; }

  // Sets the inputs of the next run and makes room for its positions in every layer's keys.
  // Independent: one state per token. Verify and prefill: one state, the tokens at its next
  // positions; prefill writes its logits to `logits` (rows with logits × vocab), the others to
  // their own buffer (logits()). The caller has checked the tokens and the room
  // (LanguageModel::check_append).
  void prepare(std::span<MuseSparkState* const> states, std::span<const int32_t> tokens,
               float* logits = nullptr);
  // After the executor ran: advances the positions (verify: by all rows, held until commit).
  void finish();

  int64_t rows() const { return program_->rows(); }
  // Not for prefill steps, whose logits are the caller's.
  const float* logits(int64_t row) const { return logits_.data() + row * config_.vocab_size; }
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }
  const std::vector<int64_t>& tap_layers() const { return tap_layers_; }
  // The taps of the last run's rows, [rows()][tap_layers().size() · H].
  const float* taps() const { return taps_.data(); }
  // The distinct experts the last run chose in each layer, in layer order.
  void experts_run(std::vector<int64_t>& out) const;

 private:
  struct Buffers {
    program::BufferId stream, q, k, v, gate, attended, branch, latent, router, expert_act,
        expert_each, mixed, angles, logits, taps, partial, local_logits, expert_mix;
  };
  void build(int workers, dist::Communicator* ranks);
  int32_t add_attention(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles);
  int32_t add_moe(StepBuilder& b, int64_t layer, int32_t residual);
  // Distinct experts a step of max_rows_ rows can choose in one layer (its plan's slots).
  int64_t moe_slots() const;
  int64_t tap_slot(int64_t layer) const;

  const MuseSparkConfig& config_;
  const MuseSparkWeights& weights_;
  const std::vector<kernels::ExpertMatrices>& experts_;
  const kernels::Rope& rope_;
  int64_t max_rows_;
  RowMode mode_;
  LogitRows logit_rows_;
  std::vector<int64_t> tap_layers_;
  std::unique_ptr<program::Program> program_;

  Buffers ids_{};
  std::vector<MuseSparkState*> states_;      // [max_rows]: each row's sequence
  std::vector<program::StepRow> step_rows_;  // prepare()'s rows (storage kept between runs)

  // Activations (f32, [rows][width]); the experts' silu(gate)·up [entries][intermediate] and down
  // products [entries][latent] (program::MoePlan's entries); a routing plan per layer.
  std::vector<float> stream_, q_, k_, v_, gate_, attended_, branch_, latent_, router_, mixed_;
  std::vector<float> expert_act_, expert_each_, angles_, logits_, taps_;
  std::vector<std::unique_ptr<program::MoePlan>> moe_plans_;
  std::vector<float> tile_max_;
  std::vector<int32_t> tile_arg_;
  std::vector<int32_t> greedy_;  // [rows with logits]
  std::unique_ptr<RankBuffers> rank_;
};

}  // namespace md
