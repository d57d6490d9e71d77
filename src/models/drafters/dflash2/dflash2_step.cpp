#include "models/drafters/dflash2/dflash2_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "models/drafters/dflash2/dflash2_attention.h"
#include "models/drafters/dflash2/dflash2_conv.h"
#include "models/drafters/dflash2/dflash2_head_math.h"
#include "program/projection_tiles.h"

namespace md {

namespace {

using program::WorkerContext;

// A DFlash2 instruction as this builder writes it: a body over a task range. Each becomes a
// family-kernel instruction of the program (one task per call); its DFlash2-specific pieces (the
// block conv, the windowed block attention, the context store) are not in the shared layer
// library yet.
using TaskBody = std::function<void(int64_t begin, int64_t end, WorkerContext& context)>;
using Prologue = std::function<void(WorkerContext& context)>;
struct Instruction {
  std::string name;
  int64_t tasks = 1;
  TaskBody body;
};

using program::kTilesPerWorker;
using program::projection_tile_rows;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

// One output-row tile of a projection, written at out[row][r] with the matrix's row count as
// the stride. With `context_out` set the tile is also applied to the round's new context rows
// (k_proj and v_proj), so that the weights are streamed once for both.
struct Tile {
  const kernels::Bf16Matrix* matrix = nullptr;
  int64_t begin = 0, end = 0;
  float* out = nullptr;
  float* context_out = nullptr;
};

// Where a fused projection's input rows come from: the residual stream normalised in the task's
// prologue (rows [first_row, first_row + rows) of it, into the worker's scratch), or a buffer.
struct ProjectionInput {
  const uint16_t* norm = nullptr;
  int64_t first_row = 0;
  int64_t rows = 0;
  const float* buffer = nullptr;  // used when norm is null
  int64_t stride = 0;             // of buffer
  float* publish = nullptr;       // receives the normalised rows (for the block conv)
};

}  // namespace

// Lowers the round into instructions. Every block-forward instruction needs the whole output of
// the one before it (norms and the conv mix all channels, attention all heads' rows), so they
// form a chain; the new context rows' features only join it at the first layer's k/v tiles.
class DFlash2Step::Builder {
 public:
  Builder(DFlash2Step& step, int workers)
      : s_(step),
        c_(step.config_),
        w_(step.weights_),
        workers_(workers),
        rows_(c_.block_size),
        hidden_(c_.hidden_size),
        eps_(static_cast<float>(c_.rms_norm_eps)) {}

  std::unique_ptr<program::Program> build() {
    context_fc_ = context_fc();
    int32_t residual = embed();
    for (int64_t layer = 0; layer < c_.num_layers; ++layer) {
      residual = attention_sublayer(layer, residual);
      residual = mlp_sublayer(layer, residual);
    }
    top_k(head(residual));
    // Scratch: a projection's normalised input rows, or attention's angles and scores.
    std::size_t attention_floats = size(c_.head_dim + c_.sliding_window + rows_);
    std::size_t scratch = std::max(size(rows_ * hidden_), attention_floats);
    return std::make_unique<program::Program>(std::move(list_), std::vector<float*>{}, workers_,
                                              scratch);
  }

 private:
  // `prologue`, when set, runs once per worker before its first task of the instruction.
  int32_t add(Instruction instruction, std::vector<int32_t> depends_on, Prologue prologue = {}) {
    program::Instruction lowered;
    lowered.name = std::move(instruction.name);
    lowered.tasks = instruction.tasks;
    for (int32_t producer : depends_on) {
      lowered.waits.push_back({producer, 0, list_[size(producer)].tasks});
    }
    lowered.operands = program::FamilyOperands{
        [body = std::move(instruction.body)](int64_t task, WorkerContext& context) {
          body(task, task + 1, context);
        },
        std::move(prologue)};
    list_.push_back(std::move(lowered));
    return static_cast<int32_t>(list_.size() - 1);
  }

  void add_tiles(std::vector<Tile>& tiles, const kernels::Bf16Matrix& m, float* out,
                 float* context_out = nullptr) const {
    int64_t tile = projection_tile_rows(m.rows, workers_);
    for (int64_t r = 0; r < m.rows; r += tile) {
      tiles.push_back({&m, r, std::min(m.rows, r + tile), out, context_out});
    }
  }

  // fc tiles over the new context rows' taps, written as their features.
  int32_t context_fc() {
    std::vector<Tile> tiles;
    add_tiles(tiles, w_.fc, nullptr);
    auto shared = std::make_shared<std::vector<Tile>>(std::move(tiles));
    DFlash2Step& s = s_;
    return add({"context_fc", static_cast<int64_t>(shared->size()),
                [&s, shared](int64_t begin, int64_t end, WorkerContext&) {
                  if (s.new_rows_ == 0) return;
                  for (int64_t t = begin; t < end; ++t) {
                    const Tile& tile = (*shared)[size(t)];
                    kernels::matmul_tile(*tile.matrix, tile.begin, tile.end, s.new_taps_,
                                         tile.matrix->cols, s.new_rows_,
                                         {s.new_features_, tile.matrix->rows, false});
                  }
                }},
               {});
  }

  // hidden_norm of every new context row: their features are final after it.
  int32_t context_norm(int32_t fc) {
    DFlash2Step& s = s_;
    const uint16_t* norm = w_.hidden_norm;
    int64_t h = hidden_;
    float eps = eps_;
    return add({"context_hidden_norm", kMaxNewContextRows,
                [&s, norm, h, eps](int64_t begin, int64_t end, WorkerContext&) {
                  for (int64_t r = begin; r < std::min(end, s.new_rows_); ++r) {
                    float* y = s.new_features_ + r * h;
                    kernels::rms_norm(y, norm, h, eps, kernels::NormWeight::kPlain, y);
                  }
                }},
               {fc});
  }

  // The anchor row and the mask rows from the target's embed_tokens.
  int32_t embed() {
    DFlash2Step& s = s_;
    int64_t h = hidden_;
    int64_t mask = c_.mask_token_id;
    return add({"embed", rows_,
                [&s, h, mask](int64_t begin, int64_t end, WorkerContext&) {
                  for (int64_t t = begin; t < end; ++t) {
                    const uint16_t* e = s.target_.embed_tokens.row(t == 0 ? s.anchor_ : mask);
                    float* y = s.hidden_.data() + t * h;
                    for (int64_t c = 0; c < h; ++c) y[c] = bf16_to_f32(e[c]);
                  }
                }},
               {});
  }

  // Every tile of every matrix, after an optional norm prologue (once per worker).
  int32_t projection(std::string name, const ProjectionInput& input, std::vector<Tile> tiles,
                     std::vector<int32_t> depends_on) {
    auto shared = std::make_shared<std::vector<Tile>>(std::move(tiles));
    DFlash2Step& s = s_;
    int64_t h = hidden_;
    float eps = eps_;
    Prologue prologue;
    if (input.norm != nullptr) {
      prologue = [&s, input, h, eps](WorkerContext& ctx) {
        for (int64_t r = 0; r < input.rows; ++r) {
          kernels::rms_norm(s.hidden_.data() + (input.first_row + r) * h, input.norm, h, eps,
                            kernels::NormWeight::kPlain, ctx.scratch + r * h);
        }
      };
    }
    auto body = [&s, shared, input, h](int64_t begin, int64_t end, WorkerContext& ctx) {
      const float* x = input.norm != nullptr ? ctx.scratch : input.buffer;
      int64_t stride = input.norm != nullptr ? h : input.stride;
      // Every worker normalised the same rows to the same bits; task 0's hands them on.
      if (input.publish != nullptr && begin == 0) {
        std::copy(ctx.scratch, ctx.scratch + input.rows * h, input.publish);
      }
      for (int64_t t = begin; t < end; ++t) {
        const Tile& tile = (*shared)[size(t)];
        int64_t width = tile.matrix->rows;
        kernels::matmul_tile(*tile.matrix, tile.begin, tile.end, x, stride, input.rows,
                             {tile.out, width, false});
        if (tile.context_out == nullptr || s.new_rows_ == 0) continue;
        // Context rows enter k_proj and v_proj as their features: no norm, no conv.
        kernels::matmul_tile(*tile.matrix, tile.begin, tile.end, s.new_features_, h, s.new_rows_,
                             {tile.context_out, width, false});
      }
    };
    return add({std::move(name), static_cast<int64_t>(shared->size()), std::move(body)},
               std::move(depends_on), std::move(prologue));
  }

  // One side of a block conv over channel ranges; side 1 also adds the result into the residual
  // stream (the sub-layer's output).
  int32_t block_conv(std::string name, const DFlash2ConvWeights& conv, int side, const float* in,
                     int32_t depends_on) {
    int64_t chunk = std::max<int64_t>(1, hidden_ / (kTilesPerWorker * workers_));
    int64_t tasks = (hidden_ + chunk - 1) / chunk;
    dflash2::BlockConvShape shape{hidden_, c_.conv_kernel_size, c_.conv_group_size};
    DFlash2Step& s = s_;
    const uint16_t* base = conv.base_kernel;
    int64_t rows = rows_;
    return add(
        {std::move(name), tasks,
         [&s, shape, base, side, in, rows, chunk](int64_t begin, int64_t end, WorkerContext&) {
           int64_t c0 = begin * chunk;
           int64_t c1 = std::min(shape.hidden, end * chunk);
           float* out = s.mixed_.data();
           dflash2::apply_block_conv_channels(base, s.coeffs_.data(), side, shape, in, rows, c0, c1,
                                              out);
           if (side == 0) return;
           for (int64_t t = 0; t < rows; ++t) {
             float* h = s.hidden_.data() + t * shape.hidden;
             const float* delta = out + t * shape.hidden;
             for (int64_t c = c0; c < c1; ++c) h[c] += delta[c];
           }
         }},
        {depends_on});
  }

  // norm prologue + dynamic conv coefficients → conv side 0: the sub-layer's mixed input.
  int32_t conv_input(const std::string& tag, const uint16_t* norm, const DFlash2ConvWeights& conv,
                     int32_t residual) {
    std::vector<Tile> tiles;
    add_tiles(tiles, conv.kernel_projection, s_.coeffs_.data());
    ProjectionInput input{norm, 0, rows_, nullptr, 0, s_.normed_.data()};
    int32_t coeffs = projection(tag + "coeffs", input, std::move(tiles), {residual});
    return block_conv(tag + "conv_in", conv, 0, s_.normed_.data(), coeffs);
  }

  int32_t attention_sublayer(int64_t layer, int32_t residual) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
    std::string tag = fmt::format("L{}.attn_", layer);
    int32_t mixed = conv_input(tag, lw.input_layernorm, lw.attention_conv, residual);
    // Just before the first k/v tiles that read them (workers visit instructions in order): the
    // fc tiles' stragglers then overlap the embedding and the first conv.
    if (context_ready_ < 0) context_ready_ = context_norm(context_fc_);
    std::vector<Tile> tiles;
    add_tiles(tiles, lw.q_proj, s_.q_.data());
    add_tiles(tiles, lw.k_proj, s_.k_.data(), s_.context_k_.data());
    add_tiles(tiles, lw.v_proj, s_.v_.data(), s_.context_v_.data());
    ProjectionInput block{nullptr, 0, rows_, s_.mixed_.data(), hidden_, nullptr};
    int32_t qkv = projection(tag + "qkv", block, std::move(tiles), {mixed, context_ready_});
    int32_t attended = attention(layer, tag + "core", qkv);
    std::vector<Tile> out_tiles;
    add_tiles(out_tiles, lw.o_proj, s_.projected_.data());
    ProjectionInput heads{nullptr, 0, rows_, s_.attended_.data(), c_.q_dim(), nullptr};
    int32_t out = projection(tag + "o_proj", heads, std::move(out_tiles), {attended});
    return block_conv(tag + "conv_out", lw.attention_conv, 1, s_.projected_.data(), out);
  }

  // Per KV head: the new context rows' keys (k_norm, RoPE) and values into the ring at their
  // positions, the block's keys and its query heads normalised and rotated, then every block row
  // of every query head over the context window and all block rows (DFlash2Drafter::attend_block).
  int32_t attention(int64_t layer, std::string name, int32_t qkv) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
    DFlash2Step& s = s_;
    const DFlash2Config& c = c_;
    return add({std::move(name), c.num_key_value_heads,
                [&s, &lw, &c, layer](int64_t begin, int64_t end, WorkerContext& ctx) {
                  for (int64_t kv = begin; kv < end; ++kv) {
                    store_context_keys(s, c, lw, layer, kv, ctx.scratch);
                    rotate_block(s, c, lw, kv, ctx.scratch);
                    attend_block(s, c, layer, kv, ctx.scratch);
                  }
                }},
               {qkv});
  }

  static void store_context_keys(DFlash2Step& s, const DFlash2Config& c,
                                 const DFlash2LayerWeights& lw, int64_t layer, int64_t kv,
                                 float* scratch) {
    int64_t hd = c.head_dim;
    float* cos_values = scratch;
    float* sin_values = scratch + hd / 2;
    float* keys = s.context_->key_ring(layer, kv);
    float* values = s.context_->value_ring(layer, kv);
    for (int64_t r = 0; r < s.new_rows_; ++r) {
      int64_t position = s.first_new_ + r;
      s.rope_.angles(position, cos_values, sin_values);
      float* key = s.context_k_.data() + r * c.kv_dim() + kv * hd;
      dflash2::normalise_and_rotate(key, lw.k_norm, hd, static_cast<float>(c.rms_norm_eps), s.rope_,
                                    cos_values, sin_values);
      const float* value = s.context_v_.data() + r * c.kv_dim() + kv * hd;
      int64_t at = s.context_->slot(position) * hd;
      std::copy(key, key + hd, keys + at);
      std::copy(value, value + hd, values + at);
    }
  }

  static void rotate_block(DFlash2Step& s, const DFlash2Config& c, const DFlash2LayerWeights& lw,
                           int64_t kv, float* scratch) {
    int64_t hd = c.head_dim;
    int64_t group = c.num_attention_heads / c.num_key_value_heads;
    auto eps = static_cast<float>(c.rms_norm_eps);
    float* cos_values = scratch;
    float* sin_values = scratch + hd / 2;
    for (int64_t t = 0; t < c.block_size; ++t) {
      s.rope_.angles(s.start_ + t, cos_values, sin_values);
      dflash2::normalise_and_rotate(s.k_.data() + t * c.kv_dim() + kv * hd, lw.k_norm, hd, eps,
                                    s.rope_, cos_values, sin_values);
      for (int64_t head = kv * group; head < (kv + 1) * group; ++head) {
        dflash2::normalise_and_rotate(s.q_.data() + t * c.q_dim() + head * hd, lw.q_norm, hd, eps,
                                      s.rope_, cos_values, sin_values);
      }
    }
  }

  static void attend_block(DFlash2Step& s, const DFlash2Config& c, int64_t layer, int64_t kv,
                           float* scratch) {
    int64_t hd = c.head_dim;
    int64_t rows = c.block_size;
    int64_t window = c.sliding_window;
    int64_t group = c.num_attention_heads / c.num_key_value_heads;
    float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    float* scores = scratch + hd;
    dflash2::KeyRun runs[dflash2::ContextStore::kMaxKeyRuns + 1];
    for (int64_t t = 0; t < rows; ++t) {
      // Visible: context positions p with (start + t) − p < window, and every block row within
      // the window — before and after t, as the block is bidirectional.
      int64_t count = s.context_->key_runs(layer, kv, s.start_ + t - window + 1, s.start_, runs);
      dflash2::BlockRows visible = dflash2::visible_block_rows(t, rows, window);
      int64_t lo = visible.first;
      int64_t hi = visible.last;
      int64_t offset = lo * c.kv_dim() + kv * hd;
      runs[count++] =
          dflash2::KeyRun{s.k_.data() + offset, s.v_.data() + offset, hi - lo + 1, c.kv_dim()};
      for (int64_t head = kv * group; head < (kv + 1) * group; ++head) {
        dflash2::attend_runs(s.q_.data() + t * c.q_dim() + head * hd,
                             std::span<const dflash2::KeyRun>(runs, size(count)), hd, scale, scores,
                             s.attended_.data() + t * c.q_dim() + head * hd);
      }
    }
  }

  int32_t mlp_sublayer(int64_t layer, int32_t residual) {
    const DFlash2LayerWeights& lw = w_.layers[size(layer)];
    std::string tag = fmt::format("L{}.mlp_", layer);
    int32_t mixed = conv_input(tag, lw.post_attention_layernorm, lw.mlp_conv, residual);
    int32_t activated = gate_up(tag + "gate_up", lw, mixed);
    std::vector<Tile> tiles;
    add_tiles(tiles, lw.down_proj, s_.projected_.data());
    ProjectionInput input{nullptr, 0, rows_, s_.gate_.data(), c_.intermediate_size, nullptr};
    int32_t down = projection(tag + "down", input, std::move(tiles), {activated});
    return block_conv(tag + "conv_out", lw.mlp_conv, 1, s_.projected_.data(), down);
  }

  // gate and up tiles of the same rows, then SiLU(gate)·up in place once both are in.
  int32_t gate_up(std::string name, const DFlash2LayerWeights& lw, int32_t mixed) {
    int64_t inter = c_.intermediate_size;
    int64_t tile = projection_tile_rows(inter, workers_);
    int64_t tasks = (inter + tile - 1) / tile;
    DFlash2Step& s = s_;
    int64_t h = hidden_;
    int64_t rows = rows_;
    return add(
        {std::move(name), tasks,
         [&s, &lw, inter, tile, h, rows](int64_t begin, int64_t end, WorkerContext&) {
           float* gate = s.gate_.data();
           float* up = s.up_.data();
           for (int64_t t = begin; t < end; ++t) {
             int64_t r0 = t * tile, r1 = std::min(inter, r0 + tile);
             kernels::matmul_tile(lw.gate_proj, r0, r1, s.mixed_.data(), h, rows,
                                  {gate, inter, false});
             kernels::matmul_tile(lw.up_proj, r0, r1, s.mixed_.data(), h, rows, {up, inter, false});
             for (int64_t r = 0; r < rows; ++r) {
               for (int64_t i = r * inter + r0; i < r * inter + r1; ++i) {
                 gate[i] = kernels::silu(gate[i]) * up[i];
               }
             }
           }
         }},
        {mixed});
  }

  // The final norm of draft rows 1.. (row 0, the anchor, predicts nothing), then the target's
  // lm_head and the selector's hidden_projection over them.
  int32_t head(int32_t residual) {
    std::vector<Tile> tiles;
    add_tiles(tiles, s_.target_.lm_head, s_.logits_.data());
    add_tiles(tiles, w_.selector.hidden_projection, s_.rho_.data());
    ProjectionInput input{w_.norm, 1, rows_ - 1, nullptr, 0, nullptr};
    return projection("head", input, std::move(tiles), {residual});
  }

  // Each draft row's top-k candidates, exactly dflash2::top_candidates.
  int32_t top_k(int32_t logits) {
    DFlash2Step& s = s_;
    int64_t vocab = c_.vocab_size;
    int64_t k = c_.selector_top_k;
    return add({"top_k", rows_ - 1,
                [&s, vocab, k](int64_t begin, int64_t end, WorkerContext&) {
                  for (int64_t i = begin; i < end; ++i) {
                    s.candidates_[size(i)] =
                        dflash2::top_candidates(s.logits_.data() + i * vocab, vocab, k);
                  }
                }},
               {logits});
  }

  DFlash2Step& s_;
  const DFlash2Config& c_;
  const DFlash2Weights& w_;
  int workers_;
  int64_t rows_;
  int64_t hidden_;
  float eps_;
  std::vector<program::Instruction> list_;
  int32_t context_fc_ = -1;     // the new context rows' fc tiles
  int32_t context_ready_ = -1;  // after it their features are final
};

DFlash2Step::DFlash2Step(const DFlash2Config& config, const DFlash2Weights& weights,
                         const TargetView& target, const kernels::Rope& rope, int workers)
    : config_(config), weights_(weights), target_(target), rope_(rope) {
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
  context_k_ = buffer(kMaxNewContextRows * c.kv_dim());
  context_v_ = buffer(kMaxNewContextRows * c.kv_dim());
  logits_ = buffer(drafts * c.vocab_size);
  rho_ = buffer(drafts * c.selector_rank);
  candidates_.resize(size(drafts));
  program_ = Builder(*this, workers).build();
}

void DFlash2Step::prepare(int32_t anchor, dflash2::ContextStore& context, const float* new_taps,
                          int64_t new_rows) {
  if (new_rows < 0 || new_rows > kMaxNewContextRows) {
    fail("a DFlash2 round folds in 0..{} new context rows, not {}", kMaxNewContextRows, new_rows);
  }
  if (anchor < 0 || anchor >= config_.vocab_size) {
    fail("DFlash2 round: anchor token {} is outside the vocabulary of {}", anchor,
         config_.vocab_size);
  }
  int64_t start = context.length() + new_rows;
  // The older positions first: the program computes only the new ones.
  context.prepare_keys(start - config_.sliding_window + 1);
  anchor_ = anchor;
  context_ = &context;
  new_taps_ = new_taps;
  new_rows_ = new_rows;
  first_new_ = context.extend(new_rows);
  new_features_ = context.feature_row(first_new_);
  start_ = start;
}

void DFlash2Step::finish() {
  context_->mark_keys(first_new_, start_);
}

}  // namespace md
