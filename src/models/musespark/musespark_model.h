// A loaded Muse Spark text model and its plain op-by-op reference forward
// (docs/models/muse-spark-nvfp4.md §4): normed embedding, sliding-window RoPE and full NoPE
// attention with QK norms and an output gate, gated residuals, the latent MoE with sigmoid routing
// over bf16 or NVFP4 experts, the softcapped output with the untrained ids masked. House numerics:
// f32 activations, f32 accumulation, weights read in place (NVFP4 rows dequantised as they are
// used). Prompts (prefill programs in chunks of prefill_rows), decode and verify steps run as
// fused programs (musespark_step.h) on the executor the run options name (mega or ops), or
// through the reference forward. On a tensor-parallel rank (ModelRunOptions::ranks) the model
// holds its shard (musespark_tensor_shard.h) and runs the programs only.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "kernels/moe_routing.h"
#include "kernels/rope.h"
#include "models/common/row_mode.h"
#include "models/language_model.h"
#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_step.h"
#include "models/musespark/musespark_weights.h"
#include "program/executor.h"

namespace md {

namespace testing {
enum class MuseAblation : int;
struct MuseProbe;
}  // namespace testing

struct MuseSparkOptions {
  testing::MuseAblation ablation{};     // tests only (musespark_testing.h)
  testing::MuseProbe* probe = nullptr;  // tests only (musespark_testing.h)
};

class MuseSparkModel final : public LanguageModel {
 public:
  // Reads config.json (+ generation_config.json, hf_quant_config.json) and the checkpoint in
  // `directory`; throws md::Error on a config or tensors the family cannot run.
  MuseSparkModel(const std::string& directory, const ModelRunOptions& run_options,
                 const MuseSparkOptions& options = {});
  // Weights built in memory (synthetic benchmark shapes): `name` stands for the directory in
  // descriptions and errors, `resident_bytes` is what the weights occupy.
  MuseSparkModel(std::string name, MuseSparkConfig config, MuseSparkWeights weights,
                 std::size_t resident_bytes, const ModelRunOptions& run_options,
                 const MuseSparkOptions& options = {});

  // Throws md::Error naming `name` for run options the family cannot run.
  static void check_run_options(const ModelRunOptions& run_options, const std::string& name);

  std::string description() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_context() const override;
  std::vector<int32_t> stop_token_ids() const override;
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override;
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  // Independent sequences, one token each, through every layer together: each dense matrix and
  // each chosen expert is read once for all of them; a row's bits are those it gets alone.
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  // Greedy tokens of the last decode/verify step run by a program (computed inside the step).
  const std::vector<int32_t>& last_greedy() const { return last_greedy_; }
  // Per layer, the distinct experts the last fused step ran (on this rank).
  const std::vector<int64_t>& experts_run() const { return experts_run_; }
  // False for the reference forward under tensor parallelism (the ranks run programs only).
  bool set_executor(ExecutorKind executor) override {
    if (tensor_parallel() && executor == ExecutorKind::kReference) return false;
    run_options_.executor = executor;
    return true;
  }
  ExecutorKind executor() const { return run_options_.executor; }
  program::Program* decode_program(int64_t rows) override;
  // Same bits however a sequence is split into forward() calls: rows are processed in order
  // through row-independent kernels.
  bool split_invariant() const override { return true; }

  // Verify rows (speculative decoding): `tokens` (1..8) at the sequence's next positions in one
  // step, logits for every row; the sequence holds them until commit() keeps the first
  // `rows_kept`. Sliding layers keep 8 spare ring slots for this.
  bool supports_verify() const override { return true; }
  void verify(SequenceState& state, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  void commit(SequenceState& state, int64_t rows_kept) override;
  // The post-layer residuals of these layers, copied out by every forward(), verify() and
  // decode() for each of its rows: [rows][layers.size() · hidden].
  void set_tap_layers(std::vector<int64_t> layers) override;
  // What a drafter sees of the target (DSpark reads its widths and taps).
  TargetView target_view() const override;
  const std::vector<float>& last_taps() const override { return last_taps_; }
  std::size_t weight_bytes() const override;
  // Every dense matrix, the router, the k experts a row takes in each layer, and lm_head (not the
  // embedding table, of which a step reads one row).
  // (On a tensor-parallel rank: its attention slices and lm_head part, the whole router and
  // projections, and its expected share of the experts a token takes.)
  std::size_t decode_weight_bytes() const override;
  // The dense matrices, the router and lm_head, and each expert the step ran once (a fused step:
  // each distinct expert its routing plans list).
  std::size_t last_step_weight_bytes() const override;

  const MuseSparkConfig& config() const { return config_; }
  // Prefill program runs so far (each a chunk of up to prefill_rows tokens): how tests tell that
  // a prompt ran as programs rather than through the reference forward.
  int64_t prefill_program_runs() const { return prefill_program_runs_; }
  const MuseSparkWeights& weights() const { return weights_; }
  bool tensor_parallel() const { return dist::tensor_parallel(run_options_.ranks); }
  // This rank's share under tensor parallelism (its heads and KV heads; the whole model's
  // otherwise), which its steps and states are sized for.
  const MuseSparkConfig& rank_config() const { return rank_config_; }

 private:
  // check_run_options(), then the rank's shard taken under tensor parallelism, or the dense
  // matrices quantised when asked.
  void apply_run_options();
  std::size_t kv_element_bytes() const;
  std::size_t expert_bytes(const MuseExperts& experts) const;
  std::size_t dense_decode_bytes() const;  // every matrix a step reads but the experts
  void embed(std::span<const int32_t> tokens, float* stream) const;
  // One row of a step: the sequence it extends and its position there.
  struct Row {
    class MuseSparkState* state = nullptr;
    int64_t position = 0;
  };
  // Rows run through every layer; rows of one sequence must come in position order.
  void run_rows(std::span<const Row> rows, std::span<const int32_t> tokens, float* stream);
  void attention(int64_t layer, std::span<const Row> rows, const float* x, float* out);
  void moe(int64_t layer, const float* x, int64_t rows, float* out);
  void output(const float* stream, int64_t rows, float* logits) const;

  std::string directory_;
  MuseSparkConfig config_;
  MuseSparkConfig rank_config_;
  std::unique_ptr<Checkpoint> checkpoint_;  // null for weights built in memory
  MuseSparkWeights weights_;
  // Under tensor parallelism, the whole lm_head (a view of the checkpoint) for a drafter beside
  // rank 0; weights_.lm_head is the rank's part.
  kernels::WeightMatrix whole_lm_head_;
  std::vector<kernels::ExpertMatrices> experts_;  // per layer, views of weights_' experts
  std::size_t resident_bytes_ = 0;                // weights built in memory, int8 copies
  ModelRunOptions run_options_;
  MuseSparkOptions options_;
  std::vector<int64_t> tap_layers_;
  std::vector<float> last_taps_;
  std::size_t step_expert_bytes_ = 0;  // experts the last step ran
  kernels::Rope rope_;
  std::unique_ptr<ThreadPool> pool_;

  // Whether decode and verify steps run the fused program: a program executor is chosen and no
  // test hook asks for the reference (ablations and routing probes exist there only).
  bool fused() const;
  // The fused steps, built on first use per (rows, row mode, logit rows), and what runs them.
  MuseStep& step(int64_t rows, RowMode mode, LogitRows logits = LogitRows::kAll);
  // A prompt's tokens (checked) through the prefill program in chunks of up to prefill_rows.
  void prefill(class MuseSparkState& state, std::span<const int32_t> tokens, LogitRows which,
               std::vector<float>& logits);
  // Runs `built` (prepared) and copies its logits, greedy tokens, taps and expert counts out.
  void run_step(MuseStep& built, std::vector<float>& logits);
  std::unique_ptr<program::Executors> executors_;
  std::vector<std::unique_ptr<MuseStep>> steps_;
  std::vector<int32_t> last_greedy_;
  std::vector<int64_t> experts_run_;  // per layer, the last fused step's distinct experts
  bool last_step_fused_ = false;
  int64_t prefill_program_runs_ = 0;
};

}  // namespace md
