// A Llama-architecture model loaded from one GGUF file (e.g. SmolLM2-135M-Instruct Q4_1) or a
// Hugging Face LlamaForCausalLM directory (config.json + safetensors; llama_hf_weights.h binds its
// BF16/F16/F32 tensors as the same GgufMatrix views), and its plain reference forward: weights stay
// in their stored format (GGUF blocks, or BF16/F16/F32) in the mapping, except HF's q/k rows, and
// are dequantised in registers by the GGUF GEMV kernels (kernels/gguf_matmul.h); activations and
// the KV cache are f32. A batch decode step streams every weight once for all its sequences, and
// each sequence's logits are bitwise those of decoding it alone (the kernels are batch invariant).
// Decode steps run the lowered step program (llama_step.h) on the fused executor by default, or op
// by op, or through the reference forward; all three give bitwise the same logits.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/cache_aligned.h"
#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "io/gguf_file.h"
#include "kernels/rope.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_gguf_weights.h"
#include "models/llama/llama_hf_weights.h"
#include "models/llama/llama_step.h"
#include "program/executor.h"

namespace md {

class LlamaGgufModel final : public LanguageModel {
 public:
  // `path` is a .gguf file or a Hugging Face model directory. Throws md::Error for another
  // architecture, unsupported settings or weight formats, and tensors missing or shaped unlike
  // the metadata says. `hf_qk` is a test seam (llama_testing.h) for directories; leave it.
  LlamaGgufModel(const std::string& path, const ModelRunOptions& options,
                 testing::LlamaHfQk hf_qk = {});
  // A GGUF file already open (the loader opened it to read its architecture).
  LlamaGgufModel(std::shared_ptr<const GgufFile> file, const ModelRunOptions& options);

  std::string description() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_context() const override { return config_.max_position_embeddings; }
  std::vector<int32_t> stop_token_ids() const override;
  std::size_t state_bytes_per_token() const override;
  std::size_t state_bytes_fixed() const override { return 0; }
  std::unique_ptr<SequenceState> new_sequence(int64_t capacity) const override;
  void forward(SequenceState& state, std::span<const int32_t> tokens, LogitRows rows,
               std::vector<float>& logits) override;
  // All sequences in one step (groups of up to 8 rows share each weight pass): the step program
  // unless the executor is the reference.
  void decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
              std::vector<float>& logits) override;
  // Prefill program runs so far (each a chunk of up to prefill_rows tokens): how tests tell that
  // a prompt ran as programs rather than through the reference forward.
  int64_t prefill_program_runs() const { return prefill_program_runs_; }
  // Greedy tokens of the last decode run by a step program (computed inside the step).
  const std::vector<int32_t>& last_greedy() const { return last_greedy_; }
  // Every row's arithmetic is its own, in one order whatever the rows beside it (prefill chunk,
  // decode step or reference forward: tested bitwise), and a KV cache can go back.
  bool split_invariant() const override { return true; }
  bool can_rewind() const override { return true; }
  void rewind(SequenceState& state, int64_t position) const override;
  // Tensor-parallel ranks run step programs only (no reference forward over a shard).
  bool set_executor(ExecutorKind executor) override {
    if (tensor_parallel() && executor == ExecutorKind::kReference) return false;
    executor_ = executor;
    return true;
  }
  ExecutorKind executor() const { return executor_; }
  std::size_t decode_weight_bytes() const override;
  program::Program* decode_program(int64_t rows) override;
  std::size_t weight_bytes() const override;

  const LlamaConfig& config() const { return config_; }
  // This rank's share under tensor parallelism (heads, KV heads, FFN columns); config() otherwise.
  const LlamaConfig& rank_config() const { return rank_config_; }
  bool tensor_parallel() const { return dist::tensor_parallel(ranks_); }
  const std::string& path() const { return path_; }

 private:
  // One row of a step: the sequence it extends and the position its token takes there.
  struct Row {
    LlamaState* state;
    int64_t position;
  };
  // One product of a fused matmul: y (+)= W·x for every row.
  struct Product {
    const GgufMatrix* w;
    float* y;
    bool accumulate = false;
  };

  void check_tokens(std::span<const int32_t> tokens) const;
  // The decode rows, checked (distinct sequences with room for one more token) before any change.
  std::vector<LlamaState*> decode_rows(std::span<SequenceState* const> states,
                                       std::span<const int32_t> tokens) const;
  // The step program for `rows` rows of `mode` (prefill: with logits of `logits`), built on first
  // use.
  LlamaStep& step(RowMode mode, int64_t rows, LogitRows logits = LogitRows::kAll);
  // A prompt's tokens through the prefill program in chunks of up to prefill_rows_ rows (a chunk's
  // split changes no result); logits as forward() says.
  void prefill(LlamaState& state, std::span<const int32_t> tokens, LogitRows which,
               std::vector<float>& logits);
  // Runs the rows through the step program for their count, writing their logits to `logits`.
  void run_step(std::span<LlamaState* const> rows, std::span<const int32_t> tokens, float* logits);
  // Runs the rows through the model; writes logits of rows [first_logit_row, rows).
  void run(std::span<const Row> rows, std::span<const int32_t> tokens, int64_t first_logit_row,
           std::vector<float>& logits);
  // The products share their input x ([rows][cols]); their output rows are split across the pool
  // together, so that one fork/join serves them all.
  void matmuls(std::initializer_list<Product> products, const float* x, int64_t rows);
  void attention(std::span<const Row> rows, const LlamaLayerWeights& layer, int64_t layer_index,
                 const float* x, float* hidden);

  // The reference forward's activations, kept between calls: a prefill chunk's buffers are
  // megabytes, and allocating them per layer cost page faults and zeroing (≈ 8 % of a prefill).
  // Cache-line aligned for the matrix tiles (base/cache_aligned.h).
  struct Activations {
    CacheAligned<float> hidden, normed, q, k, v, attended, gate, up;
  };

  // `file` is the open GGUF, or null for a Hugging Face directory at `path`.
  LlamaGgufModel(const std::string& path, std::shared_ptr<const GgufFile> file,
                 const ModelRunOptions& options, testing::LlamaHfQk hf_qk);

  std::string path_;
  // Exactly one is set: the source whose mapping the weights point into.
  std::shared_ptr<const GgufFile> gguf_;
  std::unique_ptr<Checkpoint> checkpoint_;
  LlamaConfig config_;
  dist::Communicator* ranks_;  // null: the whole model on this process
  LlamaConfig rank_config_;    // what this process's steps and states hold
  LlamaGgufWeights weights_;
  kernels::Rope rope_;  // adjacent pairs: llama.cpp's converter permuted q and k rows so
  std::unique_ptr<ThreadPool> pool_;
  ExecutorKind executor_;
  int64_t prefill_rows_;
  int64_t prefill_program_runs_ = 0;
  program::Executors executors_;
  std::vector<std::unique_ptr<LlamaStep>> steps_;  // built on first use, per mode and row count
  std::vector<int32_t> last_greedy_;
  Activations activations_;
};

}  // namespace md
