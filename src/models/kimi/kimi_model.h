// A loaded Kimi K3 text model (kimi-k3-dspark.md §2–§12) as the engine runs it: run, chat, serve
// and bench reach it through LanguageModel. Prompts run as prefill programs with KDA in its
// chunked form (a one-token prompt as a one-row decode program), decode and verify steps as one
// fused program each (kimi_step.h), on the executor the run options name (mega or ops); or all
// through the plain reference forward (kimi_reference.h; --executor reference): the same bits
// either way. Verify keeps the
// KDA state after every row so that commit() can return to any count (§11, §12).
//
// Under tensor parallelism (ModelRunOptions::ranks) each rank holds its shard
// (kimi_tensor_shard.h) and runs every step, prompts included, as programs; the reference forward
// and its test hooks are refused there.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/partition.h"
#include "io/checkpoint.h"
#include "models/kimi/kimi_config.h"
#include "models/kimi/kimi_reference.h"
#include "models/kimi/kimi_state.h"
#include "models/kimi/kimi_step.h"
#include "models/kimi/kimi_weights.h"
#include "models/language_model.h"
#include "program/executor.h"

namespace md {

// Rows one verify step takes (§11: the anchor and seven drafts).
inline constexpr int64_t kKimiVerifyRows = 8;

class KimiModel final : public LanguageModel {
 public:
  // Reads config.json (+ generation_config.json) and the checkpoint in `directory`; throws
  // md::Error naming the file and field or tensor on anything §2–§3 refuse.
  KimiModel(const std::string& directory, const ModelRunOptions& run_options,
            KimiReferenceOptions reference_options = {});
  // Weights built in memory (synthetic benchmark shapes): `name` stands for the directory in
  // descriptions and errors, `resident_bytes` is what the weights occupy.
  KimiModel(std::string name, KimiK3Config config, KimiK3Weights weights,
            std::size_t resident_bytes, const ModelRunOptions& run_options);

  // Throws md::Error naming `name` for run options the family cannot run.
  static void check_run_options(const ModelRunOptions& run_options, const std::string& name);

  std::string description() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_context() const override;
  std::vector<int32_t> stop_token_ids() const override;
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override;
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  // One token: the decode form. Several: the chunked KDA form over pieces of the prompt (its
  // rounding differs from stepping, so the model is not split-invariant).
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  // Under tensor parallelism only the program executors.
  bool set_executor(ExecutorKind executor) override {
    if (tensor_parallel() && executor == ExecutorKind::kReference) return false;
    executor_ = executor;
    return true;
  }
  ExecutorKind executor() const { return executor_; }
  program::Program* decode_program(int64_t rows) override;
  // Greedy tokens of the last decode/verify step run by a program (computed inside the step).
  const std::vector<int32_t>& last_greedy() const { return last_greedy_; }
  // Per MoE layer, the distinct experts the last fused step ran (on this rank).
  const std::vector<int64_t>& experts_run() const { return experts_run_; }

  // Verify rows: 1..8 tokens at the sequence's next positions, each row the decode form chained
  // on the row before (KDA state, MLA cache), logits for every row; commit() keeps a prefix.
  bool supports_verify() const override { return true; }
  void verify(SequenceState& state, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  void commit(SequenceState& state, int64_t rows_kept) override;
  // Taps (§11, §13.3): for tapped layer l, each row's prefix right after layer l finished, which
  // is what the drafter's aux id l + 1 reads: [rows][layers.size() · hidden].
  void set_tap_layers(std::vector<int64_t> layers) override;
  // What a drafter sees of the target (DSpark reads its widths and taps; it has its own
  // embedding and lm_head).
  TargetView target_view() const override;
  const std::vector<float>& last_taps() const override { return last_taps_; }

  std::size_t weight_bytes() const override {
    return checkpoint_ ? checkpoint_->total_bytes() : resident_bytes_;
  }
  // Every matrix a decode token reads: the dense ones, the router, the k experts a row takes
  // per MoE layer and lm_head (one embedding row, not the table); on a tensor-parallel rank its
  // slices and its expected share of those experts.
  std::size_t decode_weight_bytes() const override;
  // What the last decode(), verify() or one-token forward() read: a fused step each distinct expert
  // it ran once (per MoE layer, its routing plan's count) besides every other matrix; the reference
  // every matrix per row.
  std::size_t last_step_weight_bytes() const override;

  const KimiK3Config& config() const { return config_; }
  // The rank's share of the heads and dense MLP (the whole config on one rank).
  const KimiK3Config& rank_config() const { return rank_config_; }
  // Prefill program runs so far (each a chunk of up to prefill_rows tokens): how tests tell that
  // a prompt ran as programs rather than through the reference forward.
  int64_t prefill_program_runs() const { return prefill_program_runs_; }
  const KimiK3Weights& weights() const { return weights_; }

 private:
  std::size_t dense_decode_bytes() const;  // every matrix a step reads but the routed experts
  std::size_t expert_bytes(int64_t layer) const;  // one routed expert of MoE layer `layer`
  // `n` tokens through the reference: logits for the last `logit_rows`, taps for every token.
  void run_tokens(KimiState& state, const int32_t* ids, int64_t n, float* logits,
                  int64_t logit_rows, float* taps) const;
  // last_taps_ sized for `rows` (null when no layer is tapped), and row `row` within `taps`.
  float* taps_for(int64_t rows);
  float* tap_row(float* taps, int64_t row) const;
  int64_t tap_width() const {
    return static_cast<int64_t>(tap_layers_.size()) * config_.hidden_size;
  }

  // Checks the run options, takes the rank's shard under tensor parallelism and builds the
  // reference forward over the weights the rank holds.
  void apply_run_options(const ModelRunOptions& run_options,
                         const KimiReferenceOptions& reference_options);
  bool tensor_parallel() const { return ranks_ != nullptr; }

  std::string directory_;
  KimiK3Config config_;
  KimiK3Config rank_config_;
  std::unique_ptr<Checkpoint> checkpoint_;  // null for weights built in memory
  KimiK3Weights weights_;
  kernels::WeightMatrix whole_lm_head_;  // what a drafter reads under tensor parallelism
  std::size_t resident_bytes_ = 0;       // weights built in memory
  std::unique_ptr<ThreadPool> pool_;
  dist::Communicator* ranks_ = nullptr;  // a tensor-parallel rank's (null: one rank)
  dist::Range experts_{};                // the routed experts this rank runs
  std::unique_ptr<KimiReference> reference_;
  std::vector<int64_t> tap_layers_;
  std::vector<float> last_taps_;

  // Whether decode and verify steps run the fused program: a program executor is chosen and the
  // reference options are the engine's (ablations and cache perturbations exist there only).
  bool fused() const;
  static bool runs_programs(ExecutorKind executor, const KimiReferenceOptions& options);
  // The fused steps, built on first use per (rows, row mode, logit rows), and what runs them.
  KimiStep& step(int64_t rows, RowMode mode, LogitRows logits = LogitRows::kAll);
  // A prompt of several tokens (checked) through the prefill program in chunks of up to
  // prefill_rows, KDA chunked in each as the reference prefill runs it.
  void prefill(KimiState& state, std::span<const int32_t> tokens, LogitRows which,
               std::vector<float>& logits);
  // One sequence's tokens as one fused step: a one-token decode (kIndependent) or verify rows.
  void run_one_sequence(KimiState& state, std::span<const int32_t> tokens, RowMode mode,
                        std::vector<float>& logits);
  // Runs `built` (prepared) and copies its logits, greedy tokens and taps out.
  void run_step(KimiStep& built, std::vector<float>& logits);
  ExecutorKind executor_ = ExecutorKind::kMega;
  int64_t prefill_rows_ = 256;
  int64_t prefill_program_runs_ = 0;
  std::unique_ptr<program::Executors> executors_;
  std::vector<std::unique_ptr<KimiStep>> steps_;
  std::vector<int32_t> last_greedy_;
  std::vector<int64_t> experts_run_;  // per MoE layer, the last fused step's distinct experts
  int64_t last_step_rows_ = 0;        // rows of the last step (decode, verify, one-token forward)
  bool last_step_fused_ = false;
};

}  // namespace md
