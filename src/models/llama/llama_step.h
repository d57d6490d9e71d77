// The Llama decode step lowered to one megakernel Program (ARCHITECTURE.md "Program and
// executors"), as Qwen38Step does for Qwen3.8: embedding and RoPE angles per row; per layer the
// attention norm fused into the q|k|v tiles, attention per KV head, o tiles with the residual add,
// the MLP norm fused into gate|up tiles with SiLU·mul, down tiles with the residual add; then the
// final norm fused into the lm_head tiles with a per-tile argmax, and the argmax reduction.
// Built once per row count (independent sequences, one token each). Every row is bitwise the
// reference forward of that row alone: same GGUF kernels (batch and split invariant), same
// per-row functions (llama_math.h), same order of operations within a row.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/llama/llama_config.h"
#include "models/llama/llama_gguf_weights.h"
#include "models/llama/llama_state.h"
#include "program/program.h"

namespace md {

namespace llama {

// One tile of one matrix of a fused projection: y[n][begin, end) (+)= W[begin, end) · x[n] for
// every row n of the step.
struct ProjectionTile {
  const GgufMatrix* w;
  int64_t begin, end;
  float* out;  // column 0 of output row 0
  int64_t out_stride;
  bool accumulate;
};

}  // namespace llama

class LlamaStep {
 public:
  static constexpr int64_t kMaxRows = 8;  // one pass of the GGUF kernels' activation rows

  // `inv_freq`: the RoPE frequencies (llama::rope_inv_freq); `max_context`: the longest sequence
  // a row may extend (sizes each worker's attention scratch). All references must outlive this.
  LlamaStep(const LlamaConfig& config, const LlamaGgufWeights& weights,
            const std::vector<float>& inv_freq, int64_t max_rows, int workers, int64_t max_context);

  program::Program& program() { return *program_; }
  int64_t max_rows() const { return max_rows_; }

  // Sets the inputs of the next run: row r appends tokens[r] to *states[r] (distinct sequences)
  // and writes its logits to logits + r·vocab. Throws md::Error, before any change, for a token
  // outside the vocabulary, a full sequence or a sequence given twice.
  void prepare(std::span<LlamaState* const> states, std::span<const int32_t> tokens, float* logits);
  // After the executor ran: every row's sequence advances by one token.
  void finish();

  int64_t rows() const { return rows_; }
  int32_t greedy(int64_t row) const { return greedy_[static_cast<std::size_t>(row)]; }

 private:
  using Instructions = std::vector<program::Instruction>;
  using Tile = llama::ProjectionTile;

  void build(int workers);
  // Appends an instruction that depends on the one before it.
  static void add(Instructions& list, std::string name, int64_t tasks, double cost_per_task,
                  program::TaskBody body);
  // A fused projection: every tile, optionally after normalising the step's rows of the residual
  // stream with `norm` into the worker's scratch (then `input` is ignored).
  void add_projection(Instructions& list, std::string name, const std::vector<float>* norm,
                      std::vector<Tile> tiles, const float* input, int64_t input_stride);
  void add_layer(Instructions& list, int64_t layer, int workers);
  void add_lm_head(Instructions& list, int workers);

  // Instruction bodies over tasks [begin, end); `scratch` is the worker's.
  void embed(int64_t begin, int64_t end);
  void attend(int64_t layer, int64_t begin, int64_t end, float* scratch);
  void gate_up(const LlamaLayerWeights& w, int64_t tile, int64_t begin, int64_t end,
               float* scratch);
  void lm_head(int64_t tile, int64_t begin, int64_t end, float* scratch);
  void argmax(int64_t tiles);
  // Rows [0, rows_) of the residual stream normalised with `w` into the worker's scratch.
  void normalise(const std::vector<float>& w, float* scratch) const;

  const LlamaConfig& config_;
  const LlamaGgufWeights& weights_;
  const std::vector<float>& inv_freq_;
  int64_t max_rows_;
  int64_t vocab_;
  int64_t max_context_;
  std::unique_ptr<program::Program> program_;

  // Step inputs, read by the instruction bodies.
  int64_t rows_ = 0;
  std::array<int32_t, kMaxRows> tokens_{};
  std::array<LlamaState*, kMaxRows> states_{};
  std::array<int64_t, kMaxRows> positions_{};
  float* logits_ = nullptr;  // [rows][vocab], the caller's

  // Activations (f32, [rows][width]) and each row's RoPE cos | sin ([rows][head_dim]).
  std::vector<float> hidden_, q_, k_, v_, attended_, gate_, up_, rope_;
  std::vector<float> tile_max_;    // [lm_head tiles][max rows]
  std::vector<int32_t> tile_arg_;  // [lm_head tiles][max rows]
  std::array<int32_t, kMaxRows> greedy_{};
};

}  // namespace md
