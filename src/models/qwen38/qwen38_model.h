// A loaded Qwen3.8 (`qwen3_5`) text model and its plain op-by-op reference forward: every layer
// runs as the spec writes it, with f32 activations (house numerics), weights read in place.
#pragma once

#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "kernels/rope.h"
#include "models/language_model.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_options.h"
#include "models/qwen38/qwen38_step.h"
#include "models/qwen38/qwen38_weights.h"
#include "program/executor.h"

namespace md {

class Qwen38Model final : public LanguageModel {
 public:
  // Reads config.json (+ generation_config.json) and the checkpoint in `directory`; throws
  // md::Error on a config the family cannot run or tensors that do not match it.
  Qwen38Model(const std::string& directory, const ModelRunOptions& run_options,
              const Qwen38Options& options = {});
  // A model over weights already in memory (synthetic benchmark shapes); `name` describes it.
  Qwen38Model(std::string name, Qwen38Config config, Qwen38Weights weights,
              const ModelRunOptions& run_options, const Qwen38Options& options = {});

  std::string description() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_context() const override { return config_.max_position_embeddings; }
  std::vector<int32_t> stop_token_ids() const override;
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override;
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  // Runs the megakernel program (or its op-by-op twin) unless the executor is the reference.
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  // Greedy tokens of the last decode/verify step run by a program (computed inside the step).
  const std::vector<int32_t>& last_greedy() const { return last_greedy_; }

  // Verify rows (speculative decoding): processes `tokens` at the sequence's next positions in
  // one step, chaining the delta-net state and keeping a snapshot after every row; logits for
  // every row. The sequence holds all rows until commit() keeps the first `rows_kept`.
  bool supports_verify() const override { return true; }
  // The chunked delta rule (prefill's default) equals the recurrent one only up to rounding, so
  // a state depends on how its tokens were split unless the option turns it off.
  bool split_invariant() const override { return !options_.chunked_delta_rule; }
  void verify(SequenceState& state, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  void commit(SequenceState& state, int64_t rows_kept) override;
  // Taps are written by forward() (every row) and by verify()/decode() steps (one sequence).
  void set_tap_layers(std::vector<int64_t> layers) override;
  // decode() on the reference path.
  void decode_reference(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                        std::vector<float>& logits);
  const std::vector<float>& last_taps() const override { return last_taps_; }
  TargetView target_view() const override;

  ExecutorKind executor() const { return run_options_.executor; }

  const Qwen38Config& config() const { return config_; }
  // Weight bytes a decode step streams (every matrix but the embedding table; of a MoE block the
  // k experts a row takes, on a tensor-parallel rank its expected share of them) and in total.
  std::size_t decode_weight_bytes() const override;
  // A fused step reads each expert its rows chose once; the reference runs one forward per row.
  // Counted when asked, from the step's routing plans: the decode step does no accounting.
  std::size_t last_step_weight_bytes() const override;
  std::size_t weight_bytes() const override;
  program::Program* decode_program(int64_t rows) override;
  // Tensor-parallel ranks run step programs only (no reference forward over a shard).
  bool set_executor(ExecutorKind executor) override {
    if (tensor_parallel() && executor == ExecutorKind::kReference) return false;
    run_options_.executor = executor;
    return true;
  }
  // Per MoE layer, the distinct experts the last fused decode step ran (on this rank).
  const std::vector<int64_t>& experts_run() const { return last_decode_.experts_run; }
  bool tensor_parallel() const { return dist::tensor_parallel(run_options_.ranks); }
  // This rank's share under tensor parallelism (heads, key and value heads, FFN columns); the
  // whole config otherwise.
  const Qwen38Config& rank_config() const { return rank_config_; }
  Qwen38Options& options() { return options_; }
  // Prefill program runs so far (each a chunk of up to prefill_rows tokens): how tests tell that
  // a prompt ran as programs rather than through the reference forward.
  int64_t prefill_program_runs() const { return prefill_program_runs_; }

 private:
  // Refuses prefill rows out of range and a bf16-input mode this process cannot run, keeps this
  // rank's shard of the weights under tensor parallelism, then tags the weights with the mode.
  void apply_run_options();
  void check_tokens(const SequenceState& state, std::span<const int32_t> tokens) const;
  void run_layers(class Qwen38State& state, std::span<const int32_t> tokens, float* hidden);
  void mlp(const struct Qwen38LayerWeights& layer, const float* x, int64_t rows, float* out);
  void sparse_moe(const struct Qwen38MoeWeights& w, const float* x, int64_t rows, float* out);

  std::string directory_;
  Qwen38Config config_;
  Qwen38Config rank_config_;  // what this process's steps and states hold (apply_run_options)
  // Under tensor parallelism, the whole lm_head (a view of the checkpoint's, unsharded): a
  // drafter on this rank multiplies it itself (target_view).
  kernels::WeightMatrix whole_lm_head_;
  std::unique_ptr<Checkpoint> checkpoint_;  // null for in-memory weights
  Qwen38Weights weights_;
  ModelRunOptions run_options_;
  Qwen38Options options_;
  kernels::Rope rope_;
  std::unique_ptr<ThreadPool> pool_;

  Qwen38Step& step(int64_t rows, RowMode mode, LogitRows logits = LogitRows::kAll);
  // Whether prompts run as prefill programs: on the fused or op executor, without a test ablation
  // (only the reference forward honours those).
  bool prefills_by_program() const;
  // One chunk of a prompt (at most prefill_rows tokens, checked), by the prefill program or the
  // reference forward; the logits of the rows `which` says go to `logits`, its taps to
  // last_taps_.
  void prefill_program(Qwen38State& state, std::span<const int32_t> tokens, LogitRows which,
                       float* logits);
  void forward_reference(Qwen38State& state, std::span<const int32_t> tokens, LogitRows which,
                         float* logits);
  void run_step(Qwen38Step& step, std::vector<float>& logits);
  std::size_t expected_expert_bytes() const;  // the routed experts' share of a decode row

  int threads_ = 1;
  // The persistent team (idle workers sleep) and the op-by-op twin; the drafter shares the team.
  std::unique_ptr<program::Executors> executors_;
  std::vector<std::unique_ptr<Qwen38Step>> steps_;  // built on first use, per (rows, mode)
  // The last decode(): fused or the reference, its rows (0: none yet) and, fused, the distinct
  // experts each MoE layer ran.
  struct LastDecode {
    bool fused = false;
    std::size_t rows = 0;
    std::vector<int64_t> experts_run;
  } last_decode_;
  std::vector<int32_t> last_greedy_;
  std::vector<int64_t> tap_layers_;
  std::vector<float> last_taps_;
  int64_t prefill_program_runs_ = 0;
};

}  // namespace md
