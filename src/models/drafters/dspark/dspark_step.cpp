#include "models/drafters/dspark/dspark_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "models/common/step_builder.h"
#include "models/drafters/draft_step_parts.h"

namespace md {

namespace {

using kernels::WeightMatrix;
using program::NormKind;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

// Lowers the round onto the shared layer library, sub-layer by sub-layer, in the reference's
// order: each projection normalises the residual stream in its prologue and o_proj / down_proj
// add into it; attention's KV head g waits only for the q/k/v tiles of its heads; the new context
// rows' features join at the first layer's k/v tiles.
class DSparkStep::Builder {
 public:
  Builder(DSparkStep& step, const DraftContextSpec& spec, int workers)
      : s_(step),
        c_(step.config_),
        w_(step.weights_),
        spec_(spec),
        b_(workers),
        hidden_(c_.hidden_size),
        eps_(static_cast<float>(c_.rms_norm_eps)) {}

  std::unique_ptr<program::Program> build() {
    DSparkStep& s = s_;
    ids_ = {b_.buffer(s.hidden_), b_.buffer(s.normed_), b_.buffer(s.q_),
            b_.buffer(s.k_),      b_.buffer(s.v_),      b_.buffer(s.attended_),
            b_.buffer(s.gate_),   b_.buffer(s.up_),     b_.buffer(s.logits_)};
    context_ = s.new_rows_.bind(b_);
    context_fc_ = draft_step::context_fc(b_, spec_, context_);
    int32_t residual = b_.add(
        {"embed", c_.block_size - 1, program::EmbedOperands{w_.embed_tokens, ids_.hidden}, {}, {}});
    for (int64_t layer = 0; layer < c_.num_layers; ++layer) {
      residual = attention_sublayer(layer, residual);
      residual = mlp_sublayer(layer, residual);
    }
    head(residual);
    // Scratch: attention's angles and scores (the normalised rows are the program's own).
    const std::size_t scratch = size(c_.head_dim + c_.sliding_window + c_.block_size);
    return b_.build(scratch, std::max(c_.block_size, kMaxNewContextRows));
  }

 private:
  struct Buffers {
    program::BufferId hidden, normed, q, k, v, attended, gate, up, logits;
  };

  program::RowInput normalised(const uint16_t* norm) const {
    return StepBuilder::normalised(ids_.hidden, hidden_, NormKind::kBf16Plain, norm, eps_);
  }

  // out_proj's rows of `in` (width `in_width`) added into the residual stream.
  int32_t residual_projection(std::string name, const kernels::Bf16Matrix& w, program::BufferId in,
                              int64_t in_width, int32_t after) {
    std::vector<program::Tile> tiles;
    b_.add_tiles(tiles, WeightMatrix::of(w), ids_.hidden, 0, hidden_, /*accumulate=*/true);
    return b_.projection(std::move(name), StepBuilder::rows(in, in_width), std::move(tiles),
                         {b_.all(after)});
  }

  int32_t attention_sublayer(int64_t layer, int32_t residual) {
    const DSparkLayerWeights& lw = w_.layers[size(layer)];
    const std::string tag = fmt::format("L{}.attn_", layer);
    // Just before the first k/v tiles that read them (workers visit instructions in order): the
    // fc tiles' stragglers then overlap the embedding.
    if (context_ready_ < 0) {
      context_ready_ =
          draft_step::context_norm(b_, spec_, context_, context_fc_, kMaxNewContextRows);
    }
    const draft_step::Qkv out{ids_.q, ids_.k, ids_.v, c_.q_dim(), c_.kv_dim()};
    int32_t qkv = draft_step::qkv(b_, tag + "qkv", normalised(lw.input_layernorm), lw, out,
                                  context_, {b_.all(residual), b_.all(context_ready_)});
    program::WindowAttentionOperands op{.q = ids_.q,
                                        .k = ids_.k,
                                        .v = ids_.v,
                                        .out = ids_.attended,
                                        .q_stride = c_.q_dim(),
                                        .kv_stride = c_.kv_dim(),
                                        .context_k = context_.k,
                                        .context_v = context_.v,
                                        .context_rows_from = context_.count,
                                        .heads = c_.num_attention_heads,
                                        .kv_heads = c_.num_key_value_heads,
                                        .head_dim = c_.head_dim,
                                        .window = c_.sliding_window,
                                        .q_norm = lw.q_norm,
                                        .k_norm = lw.k_norm,
                                        .norm_eps = eps_,
                                        .rope = &s_.rope_,
                                        .layer = layer,
                                        .causal = true};
    int32_t attended = draft_step::window_attention(b_, tag + "core", op, qkv);
    return residual_projection(tag + "o_proj", lw.o_proj, ids_.attended, c_.q_dim(), attended);
  }

  int32_t mlp_sublayer(int64_t layer, int32_t residual) {
    const DSparkLayerWeights& lw = w_.layers[size(layer)];
    const std::string tag = fmt::format("L{}.mlp_", layer);
    int32_t activated = b_.gate_up_silu(
        tag + "gate_up", normalised(lw.post_attention_layernorm), WeightMatrix::of(lw.gate_proj),
        WeightMatrix::of(lw.up_proj), ids_.gate, ids_.up, {b_.all(residual)});
    return residual_projection(tag + "down", lw.down_proj, ids_.gate, c_.intermediate_size,
                               activated);
  }

  // The final norm (its rows published for the confidence head), then the lm_head over the
  // draft vocabulary.
  int32_t head(int32_t residual) {
    program::RowInput input = normalised(w_.norm);
    input.publish = ids_.normed;
    std::vector<program::Tile> tiles;
    b_.add_tiles(tiles, w_.lm_head, ids_.logits, 0, c_.draft_vocab_size, false);
    return b_.projection("head", input, std::move(tiles), {b_.all(residual)});
  }

  DSparkStep& s_;
  const DSparkConfig& c_;
  const DSparkWeights& w_;
  const DraftContextSpec& spec_;
  StepBuilder b_;
  int64_t hidden_;
  float eps_;
  Buffers ids_{};
  draft_step::ContextRows context_{};
  int32_t context_fc_ = -1;     // the new context rows' fc tiles
  int32_t context_ready_ = -1;  // after it their features are final
};

DSparkStep::DSparkStep(const DSparkConfig& config, const DSparkWeights& weights,
                       const DraftContextSpec& context, const kernels::Rope& rope, int workers)
    : config_(config), weights_(weights), rope_(rope), new_rows_(config.kv_dim()) {
  const DSparkConfig& c = config;
  const int64_t rows = c.block_size - 1;
  auto buffer = [](int64_t n) { return std::vector<float>(size(n)); };
  hidden_ = buffer(rows * c.hidden_size);
  normed_ = buffer(rows * c.hidden_size);
  q_ = buffer(rows * c.q_dim());
  k_ = buffer(rows * c.kv_dim());
  v_ = buffer(rows * c.kv_dim());
  attended_ = buffer(rows * c.q_dim());
  gate_ = buffer(rows * c.intermediate_size);
  up_ = buffer(rows * c.intermediate_size);
  logits_ = buffer(rows * c.draft_vocab_size);
  program_ = Builder(*this, context, workers).build();
}

void DSparkStep::prepare(int32_t anchor, DraftContext& context, const float* new_taps,
                         int64_t new_rows) {
  // §13.4: the block sees [anchor − window, anchor).
  new_rows_.begin(*program_, context, anchor, static_cast<int32_t>(config_.mask_token_id),
                  config_.block_size - 1, new_taps, new_rows, config_.sliding_window);
}

void DSparkStep::finish() {
  new_rows_.finish();
}

}  // namespace md
