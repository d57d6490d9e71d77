// The Kimi K3 decode and verify step lowered to one megakernel Program on the shared layer
// library (models/common/step_builder.h), in the reference forward's order (kimi_reference.h),
// so that both compute the same bits: the embedding; per layer the attention-residual mix (the
// prefix update, a drafter's tap, the block push: residual_mix), the input norm fused into the
// sub-layer's first tiles — KDA (q|k|v|f_a|b|gate, f_b, a kda task per head waiting for its own
// columns, o) or MLA without RoPE (q_a|kv_a|gate, the q_a norm, q_b, the latent cache entry per
// row, a latent_attention task per head over the cache, o) — the MLP mix, the post-attention
// norm fused into the FFN's tiles — the dense SiTU MLP, or the latent MoE (router|latent_down,
// sigmoid routing with the correction bias, each chosen MXFP4 expert's gate|up and down once for
// all rows that chose it, the mix in each row's router order, the latent norm, latent_up, the
// shared experts added); then the output mix and the final norm fused into the lm_head tiles
// with per-tile argmax. Plain-data instructions only. Built once per (rows, row mode).
//
// On a tensor-parallel rank (`ranks`; config and weights are the rank's shard, kimi_tensor_shard.h)
// the o, dense down and shared-expert down tiles write partial products that a kAllReduce sums
// (into `sub`, the shared experts' onto the routed output); the MoE routes every row on every rank
// but runs and mixes only the rank's experts, a kAllReduce summing the partial mixes before the
// latent norm; and the lm_head covers the rank's part of the vocabulary, the argmax and logits
// reduced across the ranks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/common/rank_buffers.h"
#include "models/common/row_mode.h"
#include "models/kimi/kimi_config.h"
#include "models/kimi/kimi_reference.h"
#include "models/kimi/kimi_state.h"
#include "models/kimi/kimi_weights.h"
#include "models/language_model.h"
#include "program/program.h"

namespace md {

class StepBuilder;

class KimiStep {
 public:
  static constexpr int64_t kMaxRows = program::kMaxStepRows;

  // `reference`: the model's reference forward, whose absorbed key matrices the MLA tasks read.
  // `tap_layers`: layers whose post-layer prefix every run copies out for a drafter,
  // [rows][tap_layers.size() · H].
  // Prefill mode (up to kMaxPrefillRows rows): `logits` says which rows go through the lm_head,
  // and KDA runs chunked (the reference options' kda_chunk) as the reference prefill does.
  KimiStep(const KimiK3Config& config, const KimiK3Weights& weights, const KimiReference& reference,
           int64_t max_rows, RowMode mode, int workers, std::vector<int64_t> tap_layers = {},
           LogitRows logits = LogitRows::kAll, dist::Communicator* ranks = nullptr);

  program::Program& program() { return *program_; }
  int64_t max_rows() const { return max_rows_; }
  RowMode mode() const { return mode_; }
  LogitRows logit_rows() const { return logit_rows_; }

  // Sets the inputs of the next run: room in the latent caches for its positions and, for verify
  // rows, the KDA snapshots. Independent: one state per token. Verify and prefill: one state, the
  // tokens at its next positions; prefill writes its logits to `logits` (rows with logits ×
  // vocab), the others to their own buffer (logits()). The caller has checked the tokens and the
  // room.
  void prepare(std::span<KimiState* const> states, std::span<const int32_t> tokens,
               float* logits = nullptr);
  // After the executor ran: advances the positions (verify: by all rows, held until commit).
  void finish();

  int64_t rows() const { return program_->rows(); }
  // Not for prefill steps, whose logits are the caller's.
  const float* logits(int64_t row) const { return logits_.data() + row * config_.vocab_size; }
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }
  // The taps of the last run's rows, [rows()][tap_layers.size() · H].
  const float* taps() const { return taps_.data(); }
  // The distinct experts the last run chose in each MoE layer, in layer order.
  void experts_run(std::vector<int64_t>& out) const;

 private:
  struct Buffers {
    program::BufferId stream, sub, mixed, blocks, kda_in, fa, kda_out, cq, q, ckv, mla_gate,
        mla_out, act, up, shared_act, shared_up, router, latent, expert_act, expert_each, moe_mixed,
        logits, taps, partial, local_logits, expert_mix;
  };
  void build(int workers, dist::Communicator* ranks);
  // A row-parallel projection of `w` (its rows written, or added, into `sub`): summed across the
  // ranks on a tensor-parallel rank.
  int32_t into_sub(StepBuilder& b, const std::string& name, program::RowInput input,
                   const kernels::WeightMatrix& w, bool accumulate,
                   std::vector<program::Dependency> waits);
  // A residual_mix waiting for `waits`; `tapped_layer` is the layer whose post-layer prefix the
  // update completes (-1: none).
  int32_t add_mix(StepBuilder& b, std::string name, program::PrefixUpdate update,
                  std::vector<program::Dependency> waits, int64_t blocks, int64_t push_to,
                  const std::vector<float>& weight, int64_t tapped_layer);
  int32_t add_kda(StepBuilder& b, int64_t layer, int32_t mix);
  int32_t add_mla(StepBuilder& b, int64_t layer, int32_t mix);
  // The FFN's instructions; returns what the next mix waits for (every producer of `sub`).
  std::vector<program::Dependency> add_ffn(StepBuilder& b, int64_t layer, int32_t mix);
  int64_t moe_slots() const;
  int64_t shared_width() const;  // the shared experts' intermediate width on this rank
  int64_t tap_slot(int64_t layer) const;

  const KimiK3Config& config_;
  const KimiK3Weights& weights_;
  const KimiReference& reference_;
  int64_t max_rows_;
  RowMode mode_;
  LogitRows logit_rows_;
  std::vector<int64_t> tap_layers_;
  std::unique_ptr<program::Program> program_;

  Buffers ids_{};
  std::vector<KimiState*> states_;           // [max_rows]: each row's sequence
  std::vector<program::StepRow> step_rows_;  // prepare()'s rows (storage kept between runs)

  std::vector<float> stream_, sub_, mixed_, blocks_, kda_in_, fa_, kda_out_, cq_, q_, ckv_,
      mla_gate_, mla_out_, act_, up_, shared_act_, shared_up_, router_, latent_, expert_act_,
      expert_each_, moe_mixed_, logits_, taps_;
  std::unique_ptr<RankBuffers> rank_;
  std::vector<std::unique_ptr<program::MoePlan>> moe_plans_;
  std::vector<float> tile_max_;
  std::vector<int32_t> tile_arg_;
  std::vector<int32_t> greedy_;  // [rows with logits]
};

}  // namespace md
