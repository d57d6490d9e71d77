// The DSpark block drafter (kimi-k3-dspark.md §13; RedHat speculators layout) for Kimi K3 and
// Muse Spark (the same structure on either target; it reads only their widths and taps): from
// the target's tapped hidden states of the committed positions (taps → fc → hidden_norm, their
// keys and values in a sliding-window ring, draft_context.h) it runs one causal forward over the
// block [anchor, mask, …] and walks the Markov head left to right: draft k is the argmax (or,
// sampling, a draw) of the block row's logits plus W2·W1[previous token], over the draft
// vocabulary (mapped to target ids by d2t where it is reduced). Its own embedding and lm_head where
// the checkpoint has them, else the target's; activations f32, weights bf16 read in place. A
// round's block forward runs as one fused program (dspark_step.h) on the target's team or its
// own, or as the reference forward op by op on a thread pool; both give the same bits.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "kernels/rope.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/dspark/dspark_weights.h"
#include "models/drafters/dspark_config.h"
#include "models/drafters/pending_draft_context.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"

namespace md {

struct DSparkOptions {
  // How a round's block forward runs: the fused program on a persistent team, the same program
  // op by op, or the reference forward. All three give bitwise the same proposals.
  ExecutorKind executor = ExecutorKind::kMega;
};

class DSparkDrafter final : public SpeculativeDrafter {
 public:
  // Reads `directory` (config.json + model.safetensors), checks it against the target (hidden
  // size, vocabulary, tap layers) and binds every tensor; md::Error naming the file and field or
  // tensor on any mismatch. `threads` <= 0: one per hardware thread. The target's weights (its
  // embedding and lm_head, when the drafter lends them) must outlive the drafter.
  DSparkDrafter(const std::string& directory, const TargetView& target, int threads = 1,
                const DSparkOptions& options = {});
  // A drafter whose weights are already in memory (the synthetic benchmark shapes): the same
  // target check, no checkpoint.
  DSparkDrafter(DSparkConfig config, DSparkWeights weights, const TargetView& target,
                int threads = 1, const DSparkOptions& options = {});
  DSparkDrafter(const DSparkDrafter&) = delete;
  DSparkDrafter& operator=(const DSparkDrafter&) = delete;

  int64_t block_size() const override { return config_.block_size; }
  bool has_confidence() const override { return config_.enable_confidence_head; }
  // Aux id A reads the target's residual after 0-based layer A − 1 (speculators' convention:
  // hidden_states[0] is the embedding).
  std::vector<int64_t> tap_layers() const override;

  // With the fused program, a verify step's positions wait for the next round's program.
  void append_context(std::span<const float> taps, int64_t rows) override {
    context_->append(taps, rows);
  }
  int64_t context_length() const override { return context_->length(); }
  void truncate_context(int64_t length) override { context_->truncate(length); }

  // Drafts block_size − 1 tokens after `anchor` (at position context_length()): every block row
  // sees the context positions of the last window before the anchor and the block rows up to its
  // own (§13.4, §13.5). Temperature <= 0: each draft is the argmax of its row's logits (lowest
  // id on ties); otherwise it is drawn from softmax(logits / temperature) with uniforms[k], and
  // q holds that whole distribution. keep_logits: the logits each draft was chosen from (rows of
  // the draft vocabulary). With a confidence head, each draft's confidence (§13.7).
  DraftProposal propose(int32_t anchor, float temperature, std::span<const double> uniforms,
                        bool keep_logits = false) override;

  // Same weights, pool and fused program (shared, not copied: their rounds must not run
  // concurrently), empty context / a copy of this one's.
  std::unique_ptr<SpeculativeDrafter> new_sequence() const override;
  std::unique_ptr<SpeculativeDrafter> clone() const override;

  const DSparkConfig& config() const { return config_; }

 private:
  struct Shared;
  struct Block;
  explicit DSparkDrafter(std::shared_ptr<Shared> shared);

  bool fused() const;
  // The reference block forward: the lm_head rows over the draft vocabulary; b.normed then holds
  // the final-normed rows.
  std::vector<float> block_forward(int32_t anchor, Block& b) const;
  void attention(int64_t layer, int64_t anchor_position, Block& b) const;
  void mlp(int64_t layer, Block& b) const;
  // §13.6–§13.7 over a block's rows: the Markov chain, each draft's confidence.
  DraftProposal chain(int32_t anchor, const float* base, const float* hidden, float temperature,
                      std::span<const double> uniforms, bool keep_logits) const;
  // Row k's logits plus the Markov bias of `previous`: what draft k is chosen from.
  void markov_logits(int32_t previous, const float* base, float* out) const;
  // The target id of a draft id (d2t; the same id without a reduced draft vocabulary).
  int32_t target_token(int32_t draft_id) const;
  // §13.7: σ(proj · [hidden ; markov_w1[previous]] + bias), or σ(proj · hidden + bias).
  float confidence(int32_t previous, const float* hidden) const;

  std::shared_ptr<Shared> shared_;
  const DSparkConfig& config_;
  const DSparkWeights& weights_;
  const kernels::Rope& rope_;
  ThreadPool* pool_;
  std::unique_ptr<PendingDraftContext> context_;
};

// The drafter as the speculative loop sees it (same checks as the constructor), its rounds run
// as `executor` says (the target's --executor choice).
std::unique_ptr<SpeculativeDrafter> load_dspark_drafter(
    const std::string& directory, const TargetView& target, int threads = 1,
    ExecutorKind executor = ExecutorKind::kMega);

}  // namespace md
