// The Qwen3.8 decode step lowered to one megakernel Program (ARCHITECTURE.md "Program and
// executors"): embedding, every layer as a few fused instructions (normalise→projection tiles,
// delta-net core per key head, attention per KV head, projection tiles with the residual add,
// gate/up tiles with SiLU·mul), the lm_head tiles with per-tile argmax, and the argmax reduction.
// Built once per (rows, row mode) and run for every step.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/rope.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_state.h"
#include "models/qwen38/qwen38_weights.h"
#include "program/program.h"

namespace md {

// Independent rows: B different sequences, one token each at its own position. Verify rows: B
// consecutive tokens of one sequence, the delta-net state chained row to row with a snapshot
// kept after every row so that any prefix can be committed (speculative decoding).
enum class RowMode { kIndependent, kVerify };

class Qwen38Step {
 public:
  static constexpr int64_t kMaxRows = 8;

  // `tap_layers`: 0-based layers whose post-layer residual (after the MLP add) every run copies
  // out for a speculative drafter, [rows][tap_layers.size() * H].
  Qwen38Step(const Qwen38Config& config, const Qwen38Weights& weights, const kernels::Rope& rope,
             int64_t max_rows, RowMode mode, int workers, int64_t max_context,
             std::vector<int64_t> tap_layers = {});

  program::Program& program() { return *program_; }
  int64_t max_rows() const { return max_rows_; }
  RowMode mode() const { return mode_; }

  // Sets the inputs of the next run. Independent: one state per token. Verify: one state, the
  // tokens at its next positions. Throws md::Error (before any change) when a token is outside
  // the vocabulary or a sequence lacks room.
  void prepare(std::span<Qwen38State* const> states, std::span<const int32_t> tokens);
  // After the executor ran: advances the positions (verify: by all rows, until commit).
  void finish();

  int64_t rows() const { return rows_; }
  const SequenceState* last_state() const { return states_[0]; }
  const float* logits(int64_t row) const { return logits_.data() + row * vocab_; }
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }
  const std::vector<int64_t>& tap_layers() const { return tap_layers_; }
  // The taps of the last run's rows, [rows()][tap_layers().size() * H].
  const float* taps() const { return taps_.data(); }

  // Verify mode: keeps the first `rows_kept` rows (0..rows) of the last run: positions and the
  // delta-net states return to the state after row rows_kept-1 (or before the block).
  void commit(Qwen38State& state, int64_t rows_kept);

 private:
  void build(int workers);
  int32_t add(std::vector<program::Instruction>& list, program::Instruction instruction);

  const Qwen38Config& config_;
  const Qwen38Weights& weights_;
  const kernels::Rope& rope_;
  int64_t max_rows_;
  RowMode mode_;
  int64_t vocab_;
  int64_t max_context_;
  std::vector<int64_t> tap_layers_;
  std::unique_ptr<program::Program> program_;

  // Step inputs, read by the instruction bodies.
  int64_t rows_ = 0;
  std::array<int32_t, kMaxRows> tokens_{};
  std::array<Qwen38State*, kMaxRows> states_{};
  std::array<int64_t, kMaxRows> positions_{};
  int64_t verify_start_ = 0;

  // Activations (f32, [rows][width]).
  std::vector<float> hidden_, gdn_proj_, gdn_core_, attn_q_, attn_k_, attn_v_, attn_out_, mlp_act_;
  std::vector<float> logits_;
  std::vector<float> taps_;
  std::vector<float> tile_max_;     // [lm_head tiles][rows]
  std::vector<int32_t> tile_arg_;   // [lm_head tiles][rows]
  std::array<int32_t, kMaxRows> greedy_{};
  // Verify snapshots: [gdn layer][snapshot 0..rows] (0 = before the block).
  std::vector<std::vector<Qwen38GdnState>> snapshots_;
};

}  // namespace md
