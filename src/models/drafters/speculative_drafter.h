// What the speculative decoding loop needs from a drafter (DFlash2 for Qwen3.8; test doubles in
// the tests): the target layers it taps, its context (one entry per committed target position,
// built from those taps) and a proposal of block_size - 1 tokens after an anchor.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kernels/weight_matrix.h"

namespace md::program {
class Executor;
}

namespace md {

// The target's pieces a drafter borrows (DFlash2 has no embedding or head of its own).
struct TargetView {
  kernels::WeightMatrix embed_tokens;  // [vocab, H], any format the target loaded
  kernels::WeightMatrix lm_head;       // [vocab, H]
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  // The target's persistent worker team, or null: a drafter that runs fused programs runs them
  // on it, so that no second team spins beside the target's while the other one works (the
  // drafter and the target take turns on one thread).
  program::Executor* executor = nullptr;
  // The target's bf16-input mode (kernels/bf16_matrix.h): a drafter multiplies its own bf16
  // weights the same way.
  kernels::MatmulInputs matmul_inputs = kernels::MatmulInputs::kF32;
};

struct DraftProposal {
  std::vector<int32_t> tokens;  // d_1 .. d_{block_size-1}
  // The draft distribution q_i of each draft position (sampled acceptance needs it): the
  // candidates and their probabilities (summing to 1). Greedy proposals hold {d_i, 1}.
  std::vector<std::vector<std::pair<int32_t, float>>> q;
  // Block logits of rows 1..block_size-1 ([rows][the drafter's vocabulary], f32), kept only when
  // asked for (fidelity tests); empty otherwise.
  std::vector<float> logits;
  // The drafter's estimate that each draft is accepted given that the drafts before it were
  // (DSpark's confidence head, kimi-k3-dspark.md §13.7), one per draft; empty when it has none.
  std::vector<float> confidence;
};

class SpeculativeDrafter {
 public:
  virtual ~SpeculativeDrafter() = default;

  // Rows verified per round: the anchor plus block_size - 1 drafts.
  virtual int64_t block_size() const = 0;
  // Whether proposals carry DraftProposal::confidence (a round can then stop its block early).
  virtual bool has_confidence() const { return false; }
  // 0-based target layers whose post-layer residuals (after the MLP add) the drafter reads, in
  // the order the taps are concatenated.
  virtual std::vector<int64_t> tap_layers() const = 0;

  // Context: one entry per committed target position 0 .. context_length()-1.
  // `taps` holds `rows` rows of tap_layers().size() × hidden_size floats (tap-major within a
  // row) for positions context_length() .. context_length()+rows-1.
  virtual void append_context(std::span<const float> taps, int64_t rows) = 0;
  virtual int64_t context_length() const = 0;
  // Forgets positions >= length (a new prompt that shares a prefix, or a reset to 0).
  virtual void truncate_context(int64_t length) = 0;

  // Proposes the tokens after `anchor`, which sits at position context_length() (the anchor
  // itself is not context yet: its taps arrive with the verify step). temperature <= 0: the
  // greedy walk; otherwise each draft position i samples with uniforms[i-1] in [0, 1) and q
  // holds its distribution. keep_logits fills DraftProposal::logits.
  virtual DraftProposal propose(int32_t anchor, float temperature, std::span<const double> uniforms,
                                bool keep_logits = false) = 0;

  // A drafter for another sequence (the server gives each row its own): same weights, empty
  // context. The two must not run concurrently unless the implementation says otherwise.
  virtual std::unique_ptr<SpeculativeDrafter> new_sequence() const = 0;
  // The same with a copy of this drafter's context (choices that share a prompt's prefill).
  virtual std::unique_ptr<SpeculativeDrafter> clone() const = 0;
};

}  // namespace md
