// The DFlash2 block drafter for Qwen3.8 (qwen38-dflash2.md §11): from the target's tapped hidden
// states of the committed positions it drafts block_size - 1 tokens after an anchor in one
// bidirectional forward over the block, then walks its candidate selector. Borrows the target's
// embed_tokens and lm_head; activations are f32, weights bf16 read in place. A round runs as one
// fused program (dflash2_step.h) or, for reference and ablations, op by op on a thread pool below.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "kernels/rope.h"
#include "models/drafters/dflash2/dflash2_selector.h"
#include "models/drafters/dflash2/dflash2_weights.h"
#include "models/drafters/dflash2_config.h"
#include "models/drafters/draft_context.h"
#include "models/drafters/pending_draft_context.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"

namespace md {

namespace testing {
enum class DFlash2Ablation : int;  // dflash2_testing.h
}  // namespace testing

struct DFlash2Options {
  // Test seam: value-initialised, the drafter as specified; anything else runs the reference.
  testing::DFlash2Ablation ablation{};
  // How a round runs: the fused program (dflash2_step.h) on a persistent team, the same program
  // op by op, or the reference forward below. All three give bitwise the same proposals.
  ExecutorKind executor = ExecutorKind::kMega;
};

class DFlash2Drafter : public SpeculativeDrafter {
 public:
  // Reads `directory` (config.json + model.safetensors), checks it against the target (hidden
  // size, vocabulary, layer count) and binds every tensor; throws md::Error naming the file and
  // field or tensor on any mismatch. `threads` <= 0 means one per hardware thread. The target's
  // weights must outlive the drafter.
  DFlash2Drafter(const std::string& directory, const TargetView& target, int threads = 1,
                 const DFlash2Options& options = {});
  // A drafter whose weights are already in memory (the synthetic benchmark shapes): the same
  // target check, no checkpoint.
  DFlash2Drafter(DFlash2Config config, DFlash2Weights weights, const TargetView& target,
                 int threads = 1, const DFlash2Options& options = {});
  ~DFlash2Drafter() override;
  DFlash2Drafter(const DFlash2Drafter&) = delete;
  DFlash2Drafter& operator=(const DFlash2Drafter&) = delete;

  int64_t block_size() const override { return config_.block_size; }
  std::vector<int64_t> tap_layers() const override { return config_.target_layer_ids; }

  // With the fused program, a few rows (a verify step's commit) wait in a pending buffer and the
  // next round computes their features and K/V inside its program; a larger append (a prompt)
  // is computed here.
  void append_context(std::span<const float> taps, int64_t rows) override;
  int64_t context_length() const override { return context_->length(); }
  void truncate_context(int64_t length) override;

  DraftProposal propose(int32_t anchor, float temperature, std::span<const double> uniforms,
                        bool keep_logits = false) override;

  // A drafter for another sequence: the same weights, threads and options (shared, not copied)
  // and an empty context. The drafters of one family share a thread pool, the fused program with
  // its activations and its executor, so their rounds must not run concurrently (the scheduler
  // runs them in turn).
  std::unique_ptr<SpeculativeDrafter> new_sequence() const override;
  // The same, with a copy of this drafter's context (sibling choices of one prompt), pending
  // rows included.
  std::unique_ptr<SpeculativeDrafter> clone() const override;

  const DFlash2Config& config() const { return config_; }
  // ctx_p of a committed position (hidden floats), for tests; computes pending rows first.
  std::span<const float> context_feature(int64_t position) {
    context_->flush();
    return context_->stored().feature(position);
  }

 private:
  struct Block;  // the block forward's activations and scratch

  bool fused() const;
  DraftProposal select(int32_t anchor, std::span<const float> logits, const float* rho,
                       std::span<const std::vector<dflash2::Candidate>> candidates,
                       float temperature, std::span<const double> uniforms, bool keep_logits) const;
  DraftProposal propose_fused(int32_t anchor, float temperature, std::span<const double> uniforms,
                              bool keep_logits);
  DraftProposal propose_reference(int32_t anchor, float temperature,
                                  std::span<const double> uniforms, bool keep_logits);
  void embed_block(int32_t anchor, Block& b) const;
  void attention_sublayer(int64_t layer, int64_t start, Block& b);
  void attend_block(int64_t layer, int64_t start, Block& b);
  void mlp_sublayer(int64_t layer, Block& b);
  void block_conv(const DFlash2ConvWeights& w, int side, const float* in, const float* coeffs,
                  float* out) const;

  // What every sequence's drafter of one checkpoint shares.
  struct Shared;
  explicit DFlash2Drafter(std::shared_ptr<Shared> shared);

  std::shared_ptr<Shared> shared_;
  const DFlash2Config& config_;
  const TargetView& target_;
  const DFlash2Options& options_;
  const DFlash2Weights& weights_;
  const kernels::Rope& rope_;
  ThreadPool* pool_;
  // With the fused program, a verify step's positions wait for the next round's program.
  std::unique_ptr<PendingDraftContext> context_;
};

// The drafter as the speculative loop sees it (same checks as the constructor), its rounds run
// as `executor` says (the target's --executor choice).
std::unique_ptr<SpeculativeDrafter> load_dflash2_drafter(
    const std::string& directory, const TargetView& target, int threads = 1,
    ExecutorKind executor = ExecutorKind::kMega);

}  // namespace md
