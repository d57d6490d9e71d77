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

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

LlamaStep::LlamaStep(const LlamaConfig& config, const LlamaGgufWeights& weights,
                     const kernels::Rope& rope, int64_t max_rows, int workers, int64_t max_context)
    : config_(config),
      weights_(weights),
      rope_(rope),
      max_rows_(max_rows),
      max_context_(max_context) {
  if (max_rows < 1 || max_rows > kMaxRows)
    fail("a step takes 1..{} rows, not {}", kMaxRows, max_rows);
  build(workers);
}

void LlamaStep::build(int workers) {
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
  StepBuilder b(workers, kRowGrain);
  ids_ = {b.buffer(hidden_), b.buffer(q_),        b.buffer(k_),
          b.buffer(v_),      b.buffer(attended_), b.buffer(gate_),
          b.buffer(up_),     b.buffer(angles_),   b.buffer(nullptr)};

  int32_t residual =
      b.add({"embed",
             R,
             program::EmbedOperands{WeightMatrix::of(weights_.embedding), ids_.hidden},
             {},
             {}});
  int32_t angles = b.add({"rope_angles", R, program::RopeOperands{&rope_, ids_.angles}, {}, {}});
  for (int64_t layer = 0; layer < c.num_layers; ++layer)
    residual = add_layer(b, layer, residual, angles);
  b.lm_head_argmax(
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, weights_.output_norm.data(),
                              static_cast<float>(c.rms_norm_eps)),
      WeightMatrix::of(weights_.output), ids_.logits, kMinVocabTile, tile_max_, tile_arg_,
      greedy_.data(), {b.all(residual)});
  // No worker scratch: attention keeps its scores itself (kernels/attention.h).
  program_ = b.build(0);
}

// One decoder layer; returns the instruction after which the residual stream is complete.
int32_t LlamaStep::add_layer(StepBuilder& b, int64_t layer, int32_t residual, int32_t angles) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[size(layer)];
  const int64_t H = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const std::string tag = fmt::format("L{}.", layer);

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
                                             .cache_slot = layer};
  int32_t attended = b.attention(tag + "attention", attention, qkv_at, {b.all(angles)});

  std::vector<program::Tile> o;
  b.add_tiles(o, WeightMatrix::of(w.o), ids_.hidden, 0, H, true);
  int32_t o_at = b.projection(tag + "o+residual", StepBuilder::rows(ids_.attended, c.q_dim()),
                              std::move(o), {b.all(attended)});

  int32_t gate_up = b.gate_up_silu(
      tag + "norm>gate|up+silu",
      StepBuilder::normalised(ids_.hidden, H, NormKind::kF32Plain, w.ffn_norm.data(), eps),
      WeightMatrix::of(w.gate), WeightMatrix::of(w.up), ids_.gate, ids_.up, {b.all(o_at)});

  std::vector<program::Tile> down;
  b.add_tiles(down, WeightMatrix::of(w.down), ids_.hidden, 0, H, true);
  return b.projection(tag + "down+residual", StepBuilder::rows(ids_.gate, c.intermediate_size),
                      std::move(down), {b.all(gate_up)});
}

void LlamaStep::prepare(std::span<LlamaState* const> states, std::span<const int32_t> tokens,
                        float* logits) {
  const auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > max_rows_ || states.size() != tokens.size()) {
    fail("a step of {} rows was given {} sequences and {} tokens", max_rows_, states.size(),
         tokens.size());
  }
  std::array<program::StepRow, kMaxRows> step_rows{};
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t token = tokens[size(r)];
    if (token < 0 || token >= config_.vocab_size) {
      fail("token id {} is outside the vocabulary (0..{})", token, config_.vocab_size - 1);
    }
    LlamaState* state = states[size(r)];
    if (state->position() >= state->capacity() || state->position() >= max_context_) {
      fail("context full: {} tokens already in a sequence of context {} (raise --context)",
           state->position(), state->capacity());
    }
    for (int64_t s = 0; s < r; ++s) {
      if (states[size(s)] == state) fail("decode: the same sequence appears twice in one step");
    }
    step_rows[size(r)] = {token, state->position(), state};
  }
  std::copy(states.begin(), states.end(), states_.begin());
  program_->set_rows(std::span(step_rows).first(size(rows)));
  program_->rebind(ids_.logits, logits);
}

void LlamaStep::finish() {
  for (int64_t r = 0; r < rows(); ++r) states_[size(r)]->advance(1);
}

}  // namespace md
