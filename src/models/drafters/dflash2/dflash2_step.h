// One DFlash2 drafting round (qwen38-dflash2.md §11.3–§11.6) lowered to a megakernel Program on
// the shared layer library (ARCHITECTURE.md "Program and executors"), plain data throughout: the
// features and K/V of the context positions committed since the last round (a count register
// says how many), the bidirectional block forward (block conv, window attention over the
// context's rings), the lm_head and selector projections and every draft row's top-k candidates.
// Each k_proj/v_proj weight tile is read once per round for both the block rows and the new
// context rows (a projection's extra input).
//
// Its results are bitwise those of DFlash2Drafter's reference forward: the same kernels on the
// same inputs, and kernels::matmul_tile reduces every output in an order that depends neither on
// the tile split nor on the row count nor on threads. The selector walk (sequential, a few
// hundred flops) stays outside the program.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/rope.h"
#include "models/drafters/dflash2/dflash2_selector.h"
#include "models/drafters/dflash2/dflash2_weights.h"
#include "models/drafters/dflash2_config.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/draft_step_parts.h"
#include "models/drafters/speculative_drafter.h"
#include "program/program.h"

namespace md {

class DFlash2Step {
 public:
  static constexpr int64_t kMaxNewContextRows = draft_step::kMaxNewContextRows;

  // Built for `workers` workers and the config's block_size rows; `context` describes the
  // context store's tensors. The references must outlive the step.
  DFlash2Step(const DFlash2Config& config, const DFlash2Weights& weights,
              const DraftContextSpec& context, const TargetView& target, const kernels::Rope& rope,
              int workers);

  program::Program& program() { return *program_; }

  // Sets the inputs of the next run: the anchor and the context, to which the run adds
  // `new_rows` (<= kMaxNewContextRows) positions from `new_taps` ([new_rows][taps · hidden],
  // read during the run). Makes the K/V of the older positions in the block's window present
  // first (DraftContext::prepare_keys) and extends the context by the new positions.
  void prepare(int32_t anchor, DraftContext& context, const float* new_taps, int64_t new_rows);
  // After the executor ran: records the new positions' K/V in the context's rings.
  void finish();

  // The last run's draft rows 1..block_size-1.
  std::span<const float> logits() const { return logits_; }  // [drafts][vocab]
  const float* rho() const { return rho_.data(); }           // [drafts][selector_rank]
  std::span<const std::vector<dflash2::Candidate>> candidates() const { return candidates_; }

 private:
  class Builder;

  const DFlash2Config& config_;
  const DFlash2Weights& weights_;
  const TargetView& target_;
  const kernels::Rope& rope_;
  std::unique_ptr<program::Program> program_;

  draft_step::NewContextRows new_rows_;  // the positions a round computes itself

  // Activations, f32 [rows][width]: block rows unless named otherwise.
  std::vector<float> hidden_;     // the residual stream
  std::vector<float> normed_;     // a sub-layer's normalised input (the conv reads it)
  std::vector<float> mixed_;      // a block conv's output
  std::vector<float> projected_;  // o_proj or down_proj output
  std::vector<float> coeffs_;     // the sub-layer's dynamic conv coefficients
  std::vector<float> q_, k_, v_, attended_, gate_, up_;
  std::vector<float> logits_, rho_;
  std::vector<kernels::Candidate> top_k_;  // [drafts][selector_top_k], the program's output
  std::vector<std::vector<dflash2::Candidate>> candidates_;
};

}  // namespace md
