// The Llama step lowered to one megakernel Program on the shared layer library
// (models/common/step_builder.h): embedding and RoPE angles per row; per layer the attention norm
// fused into the q|k|v tiles, attention per KV head (each waiting only for its own q/k/v tiles),
// o tiles with the residual add, the MLP norm fused into gate|up tiles with SiLU·mul, down tiles
// with the residual add; then the final norm fused into the lm_head tiles with a per-tile argmax,
// and the argmax reduction. Built once per row mode and row count: a decode step (independent
// sequences, one token each, up to 8) or a prefill chunk (up to kMaxPrefillRows consecutive
// tokens of one sequence, attention in row blocks that share each key tile, the lm_head over the
// last row or every row). Every row is bitwise the reference forward of that row: the same
// kernels (batch and split invariant) and the same per-row functions in the same order.
//
// One rank of a tensor-parallel model (a communicator of more than one rank): the weights are the
// rank's shard (models/common/tensor_shard.h) and `config` the rank's share of heads, KV heads
// and FFN columns; the o and down tiles write partial products that an all_reduce instruction
// sums across the ranks into the residual stream, and the lm_head covers the rank's part of the
// vocabulary, the argmax and the logits put back together across the ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/rope.h"
#include "models/common/rank_buffers.h"
#include "models/common/row_mode.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_gguf_weights.h"
#include "models/llama/llama_state.h"
#include "program/program.h"

namespace md {

class StepBuilder;

class LlamaStep {
 public:
  static constexpr int64_t kMaxRows = program::kMaxStepRows;

  // `mode`: kIndependent (max_rows ≤ kMaxRows, logits of every row) or kPrefill (max_rows ≤
  // kMaxPrefillRows, logits of the rows `logits` says). `max_context`: the longest sequence a row
  // may extend. All references must outlive this.
  // `ranks`: null (or one rank) for the whole model, else this rank's communicator.
  LlamaStep(const LlamaConfig& config, const LlamaGgufWeights& weights, const kernels::Rope& rope,
            RowMode mode, int64_t max_rows, LogitRows logits, int workers, int64_t max_context,
            dist::Communicator* ranks = nullptr);

  program::Program& program() { return *program_; }
  RowMode mode() const { return mode_; }
  int64_t max_rows() const { return max_rows_; }
  LogitRows logit_rows() const { return logit_rows_; }

  // Sets the inputs of the next run. Independent rows: row r appends tokens[r] to *states[r]
  // (distinct sequences); prefill: the tokens extend states[0], the only state. The logits of the
  // rows that have them go to logits + r·vocab. Throws md::Error, before any change, for a token
  // outside the vocabulary, a sequence that would overflow or a sequence given twice.
  void prepare(std::span<LlamaState* const> states, std::span<const int32_t> tokens, float* logits);
  // After the executor ran: every row's sequence advances past its tokens.
  void finish();

  int64_t rows() const { return program_->rows(); }
  // The greedy token of the r-th row with logits.
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }

 private:
  // The buffers of the step, by program id.
  struct Buffers {
    program::BufferId hidden, q, k, v, attended, gate, up, angles, logits, partial, local_logits;
  };
  void build(int workers, dist::Communicator* ranks);
  // A row-parallel projection's tiles (o, down) into the residual stream
  // (StepBuilder::residual_projection). Returns the instruction after which it is complete.
  int32_t residual_projection(StepBuilder& b, const std::string& name, program::RowInput input,
                              const GgufMatrix& w, std::vector<program::Dependency> waits);
  int32_t add_layer(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles);
  void lay_out_rows(std::span<LlamaState* const> states, std::span<const int32_t> tokens);

  const LlamaConfig& config_;
  const LlamaGgufWeights& weights_;
  const kernels::Rope& rope_;
  RowMode mode_;
  int64_t max_rows_;
  LogitRows logit_rows_;
  int64_t max_context_;
  Buffers ids_{};
  std::unique_ptr<program::Program> program_;
  std::vector<program::StepRow> step_rows_;
  std::vector<LlamaState*> states_;  // the sequences of the prepared run, each once

  // Activations (f32, [rows][width]) and each row's RoPE cos | sin ([rows][head_dim]).
  std::vector<float> hidden_, q_, k_, v_, attended_, gate_, up_, angles_;
  std::vector<float> tile_max_;        // [lm_head tiles][rows with logits]
  std::vector<int32_t> tile_arg_;      // [lm_head tiles][rows with logits]
  std::vector<int32_t> greedy_;        // [rows with logits]
  std::unique_ptr<RankBuffers> rank_;  // tensor parallelism's partial sums and vocabulary part
};

}  // namespace md
