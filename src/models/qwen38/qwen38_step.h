// The Qwen3.8 decode step lowered to one megakernel Program on the shared layer library
// (models/common/step_builder.h): embedding and RoPE angles; per Gated DeltaNet layer the norm
// fused into the qkv|z|b|a tiles, the delta-net core per key head (waiting only for its own
// channels' tiles), out tiles with the residual add; per attention layer the norm fused into the
// q|k|v tiles, gated attention per KV head, o tiles with the residual add; per layer the norm fused
// into gate|up tiles with SiLU·mul and down tiles with the residual add (and the drafter's taps);
// (MoE models: the norm fused into the router|shared-gate tiles and into the shared expert's
// gate|up tiles, the routing, each chosen expert's gate|up once for all rows that chose it, and
// down tiles that sum the experts and the shared expert into the residual); then the lm_head
// tiles with per-tile argmax and the argmax reduction. Built once per (rows, row
// mode) and run for every step. Prefill rows (a prompt chunk of one sequence, dense models) run
// each delta-net key head's conv over all rows and the chunked delta rule as the reference
// prefill does, attention in row blocks, and the lm_head over the last row or every row.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "models/common/rank_buffers.h"
#include "models/common/row_mode.h"
#include "models/language_model.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_state.h"
#include "models/qwen38/qwen38_weights.h"
#include "program/program.h"

namespace md {

class StepBuilder;

class Qwen38Step {
 public:
  static constexpr int64_t kMaxRows = program::kMaxStepRows;

  // `tap_layers`: 0-based layers whose post-layer residual (after the MLP add) every run copies
  // out for a speculative drafter, [rows][tap_layers.size() * H]. Prefill mode (up to
  // kMaxPrefillRows rows): `logits` says which rows go through the lm_head, `delta_rule_chunk` the
  // chunked delta rule's chunk (0: the recurrence, row by row). `ranks`: this rank's communicator
  // under tensor parallelism (`config` and `weights` then the rank's share,
  // qwen38_tensor_shard.h): out_proj, o_proj and down_proj sum across the ranks, the lm_head
  // covers the rank's part of the vocabulary.
  Qwen38Step(const Qwen38Config& config, const Qwen38Weights& weights, const kernels::Rope& rope,
             int64_t max_rows, RowMode mode, int workers, int64_t max_context,
             std::vector<int64_t> tap_layers = {}, LogitRows logits = LogitRows::kAll,
             int64_t delta_rule_chunk = 0, dist::Communicator* ranks = nullptr);

  program::Program& program() { return *program_; }
  int64_t max_rows() const { return max_rows_; }
  RowMode mode() const { return mode_; }
  LogitRows logit_rows() const { return logit_rows_; }
  int64_t delta_rule_chunk() const { return delta_rule_chunk_; }

  // Sets the inputs of the next run. Independent: one state per token. Verify and prefill: one
  // state, the tokens at its next positions. Prefill writes its logits to `logits` (rows with
  // logits × vocab), the others to their own buffer (logits()). Throws md::Error (before any
  // change) when a token is outside the vocabulary or a sequence lacks room.
  void prepare(std::span<Qwen38State* const> states, std::span<const int32_t> tokens,
               float* logits = nullptr);
  // After the executor ran: advances the positions (verify: by all rows, until commit).
  void finish();

  int64_t rows() const { return program_->rows(); }
  const SequenceState* last_state() const { return states_.empty() ? nullptr : states_[0]; }
  const float* logits(int64_t row) const { return logits_.data() + row * vocab_; }
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }
  const std::vector<int64_t>& tap_layers() const { return tap_layers_; }
  // The taps of the last run's rows, [rows()][tap_layers().size() * H].
  const float* taps() const { return taps_.data(); }

  // The distinct experts the last run chose in each MoE layer, in layer order (each was read
  // once for all the rows that chose it).
  // Written into `out` (its capacity reused: no allocation per step).
  void experts_run(std::vector<int64_t>& out) const;

  // Verify mode: keeps the first `rows_kept` rows (0..rows) of the last run: positions and the
  // delta-net states return to the state after row rows_kept-1 (or before the block).
  void commit(Qwen38State& state, int64_t rows_kept);

 private:
  struct Buffers {
    program::BufferId hidden, gdn_proj, gdn_core, q, k, v, attended, gate, up, angles, logits, taps,
        router, moe_in, expert_act, partial, local_logits;
  };
  // A row-parallel projection's tiles into the residual stream (StepBuilder::residual_projection).
  int32_t residual_projection(StepBuilder& b, const std::string& name, program::RowInput input,
                              std::vector<program::Tile> tiles, int32_t after);
  void build(int workers, dist::Communicator* ranks);
  int32_t add_delta_net(StepBuilder& b, int64_t layer, int32_t residual);
  int32_t add_attention(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles);
  int32_t add_mlp(StepBuilder& b, int64_t layer, int32_t residual);
  int32_t add_moe(StepBuilder& b, int64_t layer, int32_t residual);
  // Distinct experts a step of max_rows_ rows can choose in one MoE layer (its plan's slots).
  int64_t moe_slots() const;
  // The tap slot of `layer` (its post-layer residual copied out for a drafter), or -1.
  int64_t tap_slot(int64_t layer) const;

  const Qwen38Config& config_;
  const Qwen38Weights& weights_;
  const kernels::Rope& rope_;
  int64_t max_rows_;
  RowMode mode_;
  LogitRows logit_rows_;
  int64_t delta_rule_chunk_;
  int64_t vocab_;
  int64_t max_context_;
  std::vector<int64_t> tap_layers_;
  std::unique_ptr<RankBuffers> rank_;  // tensor parallelism's partial sums and vocabulary part
  std::unique_ptr<program::Program> program_;

  Buffers ids_{};
  // The states of the last run's rows (positions advance in finish() and commit()).
  std::vector<Qwen38State*> states_;
  // prepare()'s lists of the rows being laid out.
  std::vector<program::StepRow> step_rows_;
  std::vector<Qwen38State*> row_states_;
  int64_t verify_start_ = 0;

  // Activations (f32, [rows][width]).
  std::vector<float> hidden_, gdn_proj_, gdn_core_, attn_q_, attn_k_, attn_v_, attn_out_, gate_,
      up_;
  std::vector<float> angles_;
  std::vector<float> logits_;
  // MoE: router logits | shared gate logit [rows][experts + 1], the normalised rows the experts
  // read, the chosen experts' silu(gate)·up [slots][kMaxRows][moe intermediate], a plan per layer.
  std::vector<float> router_, moe_in_, expert_act_;
  std::vector<std::unique_ptr<program::MoePlan>> moe_plans_;
  std::vector<float> taps_;
  int64_t delta_net_scratch_ = 0;  // the most worker scratch a delta-net task needs
  std::vector<float> tile_max_;    // [lm_head tiles][rows]
  std::vector<int32_t> tile_arg_;  // [lm_head tiles][rows]
  std::vector<int32_t> greedy_;    // [rows with logits]
  // Verify snapshots per delta-net layer: the state before the block (0) and after each row,
  // [snapshot 0..max_rows][state floats] (DeltaNetOperands' snapshot layout).
  struct DeltaNetSnapshots {
    ZeroedArray<float> conv, recurrent;
  };
  std::vector<DeltaNetSnapshots> snapshots_;
};

}  // namespace md
