// One DSpark drafting round (kimi-k3-dspark.md §13.3–§13.5) lowered to a megakernel Program on the
// shared layer library, plain data throughout: the features and K/V of the context positions
// committed since the last round (a count register says how many), the causal block forward over
// [anchor, mask, …] (projections with their norm prologue and residual epilogue, window attention
// over the context's rings and the block rows up to each row's own), the final norm and the
// lm_head over the draft vocabulary. Each k_proj/v_proj weight tile is read once per round for
// both the block rows and the new context rows.
//
// Its results are bitwise those of DSparkDrafter's reference forward: the same kernels on the
// same inputs (kernels::matmul_tile's reduction order depends neither on the tile split nor on
// the row count nor on threads). The Markov chain and the confidence head (sequential, one small
// product per draft) stay outside the program.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/rope.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_step_parts.h"
#include "models/drafters/dspark/dspark_weights.h"
#include "models/drafters/dspark_config.h"
#include "program/program.h"

namespace md {

class DSparkStep {
 public:
  static constexpr int64_t kMaxNewContextRows = draft_step::kMaxNewContextRows;

  // Built for `workers` workers and the block's block_size − 1 rows (the last row's draft is
  // never verified); `context` describes the context store's tensors. The references must
  // outlive the step.
  DSparkStep(const DSparkConfig& config, const DSparkWeights& weights,
             const DraftContextSpec& context, const kernels::Rope& rope, int workers);

  program::Program& program() { return *program_; }

  // Sets the inputs of the next run: the anchor and the context, to which the run adds
  // `new_rows` (<= kMaxNewContextRows) positions from `new_taps` ([new_rows][taps · hidden], read
  // during the run). Makes the K/V of the older positions in the window present first and
  // extends the context by the new positions.
  void prepare(int32_t anchor, DraftContext& context, const float* new_taps, int64_t new_rows);
  // After the executor ran: records the new positions' K/V in the context's rings.
  void finish();

  // The last run's rows: lm_head logits over the draft vocabulary and the final-normed hidden
  // rows (the confidence head's input).
  std::span<const float> logits() const { return logits_; }  // [drafts][draft vocab]
  const float* hidden() const { return normed_.data(); }     // [drafts][hidden]

 private:
  class Builder;

  const DSparkConfig& config_;
  const DSparkWeights& weights_;
  const kernels::Rope& rope_;
  std::unique_ptr<program::Program> program_;

  draft_step::NewContextRows new_rows_;  // the positions a round computes itself

  // Activations, f32 [rows][width]: block rows unless named otherwise.
  std::vector<float> hidden_;  // the residual stream
  std::vector<float> normed_;  // the final norm's rows
  std::vector<float> q_, k_, v_, attended_, gate_, up_;
  std::vector<float> logits_;
};

}  // namespace md
