#include "models/llama/llama_step.h"

#include <fmt/format.h>

#include "base/error.h"
#include "models/common/step_builder.h"

namespace md {

using kernels::WeightMatrix;
using program::NormKind;

namespace {

// Tiles start at multiples of this: a multiple of every GGUF kernel path's register block, so no
// tile pays for a ragged block (results do not depend on the split, only speed does).
constexpr int64_t kRowGrain = 16;
// lm_head tiles are larger: the vocabulary has hundreds of them even so, and the per-tile argmax
// results the final reduction reads stay few.
constexpr int64_t kMinVocabTile = 256;
// A prefill chunk's attention tasks: a KV head over this many rows (every query head of its
// group), whose queries share each key tile's load.
constexpr int64_t kAttentionRowBlock = 8;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

LlamaStep::LlamaStep(const LlamaConfig& config, const LlamaGgufWeights& weights,
                     const kernels::Rope& rope, RowMode mode, int64_t max_rows, LogitRows logits,
                     int workers, int64_t max_context, dist::Communicator* ranks)
    : config_(config),
      weights_(weights),
      rope_(rope),
      mode_(mode),
      max_rows_(max_rows),
      logit_rows_(mode == RowMode::kPrefill ? logits : LogitRows::kAll),
      max_context_(max_context) {
  if (mode != RowMode::kIndependent && mode != RowMode::kPrefill)
    fail("a Llama step has independent or prefill rows");
  const int64_t most = mode == RowMode::kPrefill ? kMaxPrefillRows : kMaxRows;
  if (max_rows < 1 || max_rows > most) fail("a step takes 1..{} rows, not {}", most, max_rows);
  build(workers, ranks);
}

void LlamaStep::build(int workers, dist::Communicator* ranks) {
  const LlamaConfig& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size, I = c.intermediate_size;
  for (auto [storage, width] : {std::pair{&hidden_, H},
                                {&q_, c.q_dim()},
                                {&k_, c.kv_dim()},
                                {&v_, c.kv_dim()},
                                {&attended_, c.q_dim()},
                                {&gate_, I},
                                {&up_, I},
                                {&angles_, c.head_dim}}) {
    storage->assign(size(R * width), 0.0f);
  }
  // The lm_head reads every row, or the last one only.
  const bool last_only = logit_rows_ == LogitRows::kLast;
  const int64_t logit_rows = last_only ? 1 : R;
  greedy_.assign(size(logit_rows), 0);
  rank_ = std::make_unique<RankBuffers>(ranks, R, H, logit_rows, c.vocab_size);
  StepBuilder b(workers, kRowGrain);
  ids_ = {b.buffer(hidden_),
          b.buffer(q_),
          b.buffer(k_),
          b.buffer(v_),
          b.buffer(attended_),
          b.buffer(gate_),
          b.buffer(up_),
          b.buffer(angles_),
          b.buffer(nullptr),
          b.buffer(rank_->partial),
          b.buffer(rank_->local_logits)};

  int32_t residual =
      b.add({"embed",
             R,
             program::EmbedOperands{WeightMatrix::of(weights_.embedding), ids_.hidden},
             {},
             {}});
  int32_t angles = b.add({"rope_angles", R, program::RopeOperands{&rope_, ids_.angles}, {}, {}});
  for (int64_t layer = 0; layer < c.num_layers; ++layer)
    residual = add_layer(b, layer, residual, angles);
  program::RowInput final_rows =
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, weights_.output_norm.data(),
                              static_cast<float>(c.rms_norm_eps));
  if (last_only) final_rows.first_row = -1;
  b.lm_head_argmax(final_rows, WeightMatrix::of(weights_.output), ids_.logits, kMinVocabTile,
                   tile_max_, tile_arg_, greedy_.data(), {b.all(residual)}, {}, logit_rows,
                   rank_->vocab_shard(ids_.local_logits, ids_.logits));
  // No worker scratch: attention keeps its scores itself (kernels/attention.h).
  program_ = b.build(0, R);
}

int32_t LlamaStep::residual_projection(StepBuilder& b, const std::string& name,
                                       program::RowInput input, const GgufMatrix& w,
                                       std::vector<program::Dependency> waits) {
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, WeightMatrix::of(w), ids_.hidden, 0, config_.hidden_size, true);
  return b.residual_projection(name, input, std::move(tiles), std::move(waits), rank_->ranks(),
                               ids_.partial);
}

// One decoder layer; returns the instruction after which the residual stream is complete.
int32_t LlamaStep::add_layer(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);
  const bool prefill = mode_ == RowMode::kPrefill;
  const int64_t row_blocks = (max_rows_ + kAttentionRowBlock - 1) / kAttentionRowBlock;

  std::vector<program::Tile> qkv;
  b.add_tiles(qkv, WeightMatrix::of(w.q), ids_.q, 0, c.q_dim(), false);
  b.add_tiles(qkv, WeightMatrix::of(w.k), ids_.k, 0, c.kv_dim(), false);
  b.add_tiles(qkv, WeightMatrix::of(w.v), ids_.v, 0, c.kv_dim(), false);
  int32_t qkv_at = b.projection(
      tag + "norm>qkv",
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, w.attn_norm.data(), eps),
      std::move(qkv), {b.all(residual)});

  const program::AttentionOperands attention{.q = ids_.q,
                                             .k = ids_.k,
                                             .v = ids_.v,
                                             .out = ids_.attended,
                                             .q_stride = c.q_dim(),
                                             .kv_stride = c.kv_dim(),
                                             .out_stride = c.q_dim(),
                                             .heads = c.num_attention_heads,
                                             .kv_heads = c.num_key_value_heads,
                                             .head_dim = c.head_dim,
                                             .angles = ids_.angles,
                                             .rope = &rope_,
                                             .cache_slot = layer,
                                             .row_block = prefill ? kAttentionRowBlock : 0,
                                             .row_blocks = prefill ? row_blocks : 0};
  int32_t attended = b.attention(tag + "attention", attention, qkv_at, {b.all(angles)});

  int32_t o_at = residual_projection(b, tag + "o", StepBuilder::rows(ids_.attended, c.q_dim()), w.o,
                                     {b.all(attended)});

  int32_t gate_up = b.gate_up_silu(
      tag + "norm>gate|up+silu",
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, w.ffn_norm.data(), eps),
      WeightMatrix::of(w.gate), WeightMatrix::of(w.up), ids_.gate, ids_.up, {b.all(o_at)});

  return residual_projection(b, tag + "down", StepBuilder::rows(ids_.gate, c.intermediate_size),
                             w.down, {b.all(gate_up)});
}

void LlamaStep::lay_out_rows(std::span<LlamaState* const> states, std::span<const int32_t> tokens) {
  const auto rows = static_cast<int64_t>(tokens.size());
  const bool prefill = mode_ == RowMode::kPrefill;
  if (rows < 1 || rows > max_rows_ || states.size() != (prefill ? 1 : tokens.size())) {
    fail("a step of {} rows was given {} sequences and {} tokens", max_rows_, states.size(),
         tokens.size());
  }
  for (int32_t token : tokens) {
    if (token < 0 || token >= config_.vocab_size) {
      fail("token id {} is outside the vocabulary (0..{})", token, config_.vocab_size - 1);
    }
  }
  for (std::size_t s = 0; s < states.size(); ++s) {
    const LlamaState* state = states[s];
    const int64_t end = state->position() + (prefill ? rows : 1);
    if (end > state->capacity() || end > max_context_) {
      fail("context full: {} tokens already in a sequence of context {} (raise --context)",
           state->position(), state->capacity());
    }
    for (std::size_t t = 0; t < s; ++t) {
      if (states[t] == state) fail("decode: the same sequence appears twice in one step");
    }
  }
  step_rows_.clear();
  for (int64_t r = 0; r < rows; ++r) {
    LlamaState* state = states[prefill ? 0 : size(r)];
    step_rows_.push_back({tokens[size(r)], state->position() + (prefill ? r : 0), state});
  }
  states_.assign(states.begin(), states.end());
}

void LlamaStep::prepare(std::span<LlamaState* const> states, std::span<const int32_t> tokens,
                        float* logits) {
  lay_out_rows(states, tokens);
  program_->set_rows(step_rows_);
  program_->rebind(ids_.logits, logits);
}

void LlamaStep::finish() {
  const int64_t advance = mode_ == RowMode::kPrefill ? rows() : 1;
  for (LlamaState* state : states_) state->advance(advance);
}

}  // namespace md
