#include "models/drafters/dflash2/dflash2_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"
#include "models/common/step_builder.h"
#include "models/drafters/draft_step_parts.h"
#include "program/projection_tiles.h"

namespace md {

namespace {

using kernels::WeightMatrix;
using program::NormKind;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

// Lowers the round onto the shared layer library, sub-layer by sub-layer. Every block-forward
// instruction needs the whole output of the one before it (norms and the conv mix all channels),
// except attention, whose KV head g waits only for the q/k/v tiles of its heads; the new context
// rows' features join at the first layer's k/v tiles.
class DFlash2Step::Builder {
 public:
  Builder(DFlash2Step& step, const DraftContextSpec& spec, int workers)
      : s_(step),
        c_(step.config_),
        w_(step.weights_),
        spec_(spec),
        b_(workers),
        hidden_(c_.hidden_size),
        eps_(static_cast<float>(c_.rms_norm_eps)) {}

  std::unique_ptr<program::Program> build() {
    DFlash2Step& s = s_;
    ids_ = {b_.buffer(s.hidden_),    b_.buffer(s.normed_), b_.buffer(s.mixed_),
            b_.buffer(s.projected_), b_.buffer(s.coeffs_), b_.buffer(s.q_),
            b_.buffer(s.k_),         b_.buffer(s.v_),      b_.buffer(s.attended_),
            b_.buffer(s.gate_),      b_.buffer(s.up_),     b_.buffer(s.logits_),
            b_.buffer(s.rho_)};
    context_ = s.new_rows_.bind(b_);
    context_fc_ = draft_step::context_fc(b_, spec_, context_);
    int32_t residual = b_.add({"embed",
                               c_.block_size,
                               program::EmbedOperands{s.target_.embed_tokens, ids_.hidden},
                               {},
                               {}});
    for (int64_t layer = 0; layer < c_.num_layers; ++layer) {
      residual = attention_sublayer(layer, residual);
      residual = mlp_sublayer(layer, residual);
    }
    top_k(head(residual));
    // Scratch: attention's angles and scores (the normalised rows are the program's own).
    const std::size_t scratch = size(c_.head_dim + c_.sliding_window + c_.block_size);
    return b_.build(scratch, std::max(c_.block_size, kMaxNewContextRows));
  }

 private:
  struct Buffers {
    program::BufferId hidden, normed, mixed, projected, coeffs, q, k, v, attended, gate, up, logits,
        rho;
  };

  // One side of a block conv over channel ranges; side 1 also adds into the residual stream.
  int32_t block_conv(std::string name, const DFlash2ConvWeights& conv, int side,
                     program::BufferId in, int32_t depends_on) {
    program::BlockConvOperands op{
        .base_kernel = conv.base_kernel,
        .coefficients = ids_.coeffs,
        .hidden = hidden_,
        .taps = c_.conv_kernel_size,
        .group_size = c_.conv_group_size,
        .side = side,
        .chunk = std::max<int64_t>(1, hidden_ / (program::kTilesPerWorker * b_.workers())),
        .in = in,
        .out = ids_.mixed,
        .residual = side == 1 ? ids_.hidden : program::kNoBuffer};
    const int64_t tasks = (hidden_ + op.chunk - 1) / op.chunk;
    return b_.add({std::move(name), tasks, op, {b_.all(depends_on)}, {}});
  }

  // norm prologue (published for the conv) + dynamic conv coefficients → conv side 0: the
  // sub-layer's mixed input.
  int32_t conv_input(const std::string& tag, const uint16_t* norm, const DFlash2ConvWeights& conv,
                     int32_t residual) {
    program::RowInput input =
        StepBuilder::normalised(ids_.hidden, hidden_, NormKind::kBf16Plain, norm, eps_);
    input.publish = ids_.normed;
    std::vector<program::Tile> tiles;
    b_.add_tiles(tiles, WeightMatrix::of(conv.kernel_projection), ids_.coeffs, 0,
                 c_.kernel_projection_rows(), false);
    int32_t coeffs = b_.projection(tag + "coeffs", input, std::move(tiles), {b_.all(residual)});
    return block_conv(tag + "conv_in", conv, 0, ids_.normed, coeffs);
  }

  int32_t attention_sublayer(int64_t layer, int32_t residual) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
    const std::string tag = fmt::format("L{}.attn_", layer);
    int32_t mixed = conv_input(tag, lw.input_layernorm, lw.attention_conv, residual);
    // Just before the first k/v tiles that read them (workers visit instructions in order): the
    // fc tiles' stragglers then overlap the embedding and the first conv.
    if (context_ready_ < 0) {
      context_ready_ =
          draft_step::context_norm(b_, spec_, context_, context_fc_, kMaxNewContextRows);
    }
    // Context rows enter k_proj and v_proj as their features: no norm, no conv.
    const draft_step::Qkv qkv_out{ids_.q, ids_.k, ids_.v, c_.q_dim(), c_.kv_dim()};
    int32_t qkv = draft_step::qkv(b_, tag + "qkv", StepBuilder::rows(ids_.mixed, hidden_), lw,
                                  qkv_out, context_, {b_.all(mixed), b_.all(context_ready_)});
    int32_t attended = attention(layer, tag + "core", qkv);
    std::vector<program::Tile> out;
    b_.add_tiles(out, WeightMatrix::of(lw.o_proj), ids_.projected, 0, hidden_, false);
    int32_t o_proj = b_.projection(tag + "o_proj", StepBuilder::rows(ids_.attended, c_.q_dim()),
                                   std::move(out), {b_.all(attended)});
    return block_conv(tag + "conv_out", lw.attention_conv, 1, ids_.projected, o_proj);
  }

  // The windowed block attention, KV head g waiting only for the q tiles of its query heads and
  // the k/v tiles of its head (which also write the new context rows' k/v).
  int32_t attention(int64_t layer, std::string name, int32_t qkv) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
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
                                        .layer = layer};
    return draft_step::window_attention(b_, std::move(name), op, qkv);
  }

  int32_t mlp_sublayer(int64_t layer, int32_t residual) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
    const std::string tag = fmt::format("L{}.mlp_", layer);
    int32_t mixed = conv_input(tag, lw.post_attention_layernorm, lw.mlp_conv, residual);
    int32_t activated = b_.gate_up_silu(
        tag + "gate_up", StepBuilder::rows(ids_.mixed, hidden_), WeightMatrix::of(lw.gate_proj),
        WeightMatrix::of(lw.up_proj), ids_.gate, ids_.up, {b_.all(mixed)});
    std::vector<program::Tile> tiles;
    b_.add_tiles(tiles, WeightMatrix::of(lw.down_proj), ids_.projected, 0, hidden_, false);
    int32_t down = b_.projection(tag + "down", StepBuilder::rows(ids_.gate, c_.intermediate_size),
                                 std::move(tiles), {b_.all(activated)});
    return block_conv(tag + "conv_out", lw.mlp_conv, 1, ids_.projected, down);
  }

  // The final norm of draft rows 1.. (row 0, the anchor, predicts nothing), then the target's
  // lm_head and the selector's hidden_projection over them.
  int32_t head(int32_t residual) {
    program::RowInput input =
        StepBuilder::normalised(ids_.hidden, hidden_, NormKind::kBf16Plain, w_.norm, eps_);
    input.first_row = 1;
    std::vector<program::Tile> tiles;
    b_.add_tiles(tiles, s_.target_.lm_head, ids_.logits, 0, c_.vocab_size, false);
    b_.add_tiles(tiles, WeightMatrix::of(w_.selector.hidden_projection), ids_.rho, 0,
                 c_.selector_rank, false);
    return b_.projection("head", input, std::move(tiles), {b_.all(residual)});
  }

  // Each draft row's top-k candidates (kernels/top_k.h, as dflash2::top_candidates).
  int32_t top_k(int32_t logits) {
    program::TopKOperands op{ids_.logits, c_.vocab_size,   c_.vocab_size, c_.selector_top_k,
                             1,           s_.top_k_.data()};
    return b_.add({"top_k", c_.block_size - 1, op, {b_.all(logits)}, {}});
  }

  DFlash2Step& s_;
  const DFlash2Config& c_;
  const DFlash2Weights& w_;
  const DraftContextSpec& spec_;
  StepBuilder b_;
  int64_t hidden_;
  float eps_;
  Buffers ids_{};
  draft_step::ContextRows context_{};
  int32_t context_fc_ = -1;     // the new context rows' fc tiles
  int32_t context_ready_ = -1;  // after it their features are final
};

DFlash2Step::DFlash2Step(const DFlash2Config& config, const DFlash2Weights& weights,
                         const DraftContextSpec& context, const TargetView& target,
                         const kernels::Rope& rope, int workers)
    : config_(config), weights_(weights), target_(target), rope_(rope), new_rows_(config.kv_dim()) {
  const DFlash2Config& c = config;
  int64_t rows = c.block_size, drafts = rows - 1;
  auto buffer = [](int64_t n) { return std::vector<float>(size(n)); };
  hidden_ = buffer(rows * c.hidden_size);
  normed_ = buffer(rows * c.hidden_size);
  mixed_ = buffer(rows * c.hidden_size);
  projected_ = buffer(rows * c.hidden_size);
  coeffs_ = buffer(rows * c.kernel_projection_rows());
  q_ = buffer(rows * c.q_dim());
  k_ = buffer(rows * c.kv_dim());
  v_ = buffer(rows * c.kv_dim());
  attended_ = buffer(rows * c.q_dim());
  gate_ = buffer(rows * c.intermediate_size);
  up_ = buffer(rows * c.intermediate_size);
  logits_ = buffer(drafts * c.vocab_size);
  rho_ = buffer(drafts * c.selector_rank);
  top_k_.resize(size(drafts * c.selector_top_k));
  candidates_.resize(size(drafts));
  program_ = Builder(*this, context, workers).build();
}

void DFlash2Step::prepare(int32_t anchor, DraftContext& context, const float* new_taps,
                          int64_t new_rows) {
  if (anchor < 0 || anchor >= config_.vocab_size) {
    fail("DFlash2 round: anchor token {} is outside the vocabulary of {}", anchor,
         config_.vocab_size);
  }
  // Block row t sees the context positions within the window before it (§11.5).
  new_rows_.begin(*program_, context, anchor, static_cast<int32_t>(config_.mask_token_id),
                  config_.block_size, new_taps, new_rows, config_.sliding_window - 1);
}

void DFlash2Step::finish() {
  new_rows_.finish();
  const int64_t stride = config_.selector_top_k;
  const auto k = static_cast<std::ptrdiff_t>(std::min(stride, config_.vocab_size));
  for (std::size_t row = 0; row < candidates_.size(); ++row) {
    auto first = top_k_.begin() + static_cast<std::ptrdiff_t>(row) * stride;
    candidates_[row].assign(first, first + k);
  }
}

}  // namespace md
