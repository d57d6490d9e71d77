#include "models/qwen38/qwen38_step.h"

#include "models/qwen38/qwen38_head_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/causal_conv.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/norms.h"
#include "program/projection_tiles.h"

namespace md {

namespace {

using program::Instruction;
using program::WorkerContext;

using program::projection_tile_rows;

// One tile of one matrix of a fused projection instruction.
struct Tile {
  const kernels::Bf16Matrix* matrix;
  int64_t begin, end;
  float* out;  // the matrix's output column 0 of row 0
  int64_t out_stride;
};

void add_tiles(std::vector<Tile>& tiles, const kernels::Bf16Matrix& w, float* out, int64_t stride,
               int workers) {
  int64_t tile = projection_tile_rows(w.rows, workers);
  for (int64_t r = 0; r < w.rows; r += tile) tiles.push_back({&w, r, std::min(w.rows, r + tile), out, stride});
}

double tile_cost(const std::vector<Tile>& tiles) {
  double bytes = 0;
  for (const Tile& t : tiles) bytes += static_cast<double>((t.end - t.begin) * t.matrix->cols * 2);
  return bytes / static_cast<double>(tiles.size());
}

}  // namespace

Qwen38Step::Qwen38Step(const Qwen38Config& config, const Qwen38Weights& weights,
                       const kernels::Rope& rope, int64_t max_rows, RowMode mode, int workers,
                       int64_t max_context, std::vector<int64_t> tap_layers)
    : config_(config),
      weights_(weights),
      rope_(rope),
      max_rows_(max_rows),
      mode_(mode),
      vocab_(config.vocab_size),
      max_context_(max_context),
      tap_layers_(std::move(tap_layers)) {
  if (max_rows < 1 || max_rows > kMaxRows) fail("a step takes 1..{} rows, not {}", kMaxRows, max_rows);
  build(workers);
}

int32_t Qwen38Step::add(std::vector<Instruction>& list, Instruction instruction) {
  if (!list.empty()) instruction.depends_on.push_back(static_cast<int32_t>(list.size() - 1));
  list.push_back(std::move(instruction));
  return static_cast<int32_t>(list.size() - 1);
}

void Qwen38Step::build(int workers) {
  const Qwen38Config& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t group = c.linear_head_group(), hd = c.head_dim;
  const int64_t gdn_width = c.conv_dim() + c.value_dim() + 2 * c.linear_num_value_heads;
  const int64_t history = c.linear_conv_kernel - 1;
  const auto eps = static_cast<float>(c.rms_norm_eps);

  hidden_.assign(static_cast<std::size_t>(R * H), 0.0f);
  gdn_proj_.assign(static_cast<std::size_t>(R * gdn_width), 0.0f);
  gdn_core_.assign(static_cast<std::size_t>(R * c.value_dim()), 0.0f);
  attn_q_.assign(static_cast<std::size_t>(R * c.q_proj_dim()), 0.0f);
  attn_k_.assign(static_cast<std::size_t>(R * c.kv_dim()), 0.0f);
  attn_v_.assign(static_cast<std::size_t>(R * c.kv_dim()), 0.0f);
  attn_out_.assign(static_cast<std::size_t>(R * c.attn_output_dim()), 0.0f);
  mlp_act_.assign(static_cast<std::size_t>(2 * R * c.intermediate_size), 0.0f);
  logits_.assign(static_cast<std::size_t>(R * vocab_), 0.0f);
  const auto n_taps = static_cast<int64_t>(tap_layers_.size());
  taps_.assign(static_cast<std::size_t>(R * n_taps * H), 0.0f);

  // Worker scratch: normalised input rows, rope angles, the delta-net head's conv outputs and
  // the attention scores of one query.
  const std::size_t x_floats = static_cast<std::size_t>(R * H);
  const std::size_t rope_floats = static_cast<std::size_t>(c.rotary_dim());
  const std::size_t conv_floats = static_cast<std::size_t>(2 * dk + group * dv);
  const std::size_t scratch = x_floats + rope_floats + conv_floats + static_cast<std::size_t>(max_context_);

  std::vector<Instruction> list;
  float* hidden = hidden_.data();

  // Normalises the step's rows of the residual stream into the worker's scratch (the fused
  // prologue of every projection that follows a norm).
  auto normalise = [this, H, eps](const uint16_t* weight, WorkerContext& ctx) {
    for (int64_t r = 0; r < rows_; ++r) {
      kernels::rms_norm(hidden_.data() + r * H, weight, H, eps, kernels::NormWeight::kZeroCentred,
                        ctx.scratch + r * H);
    }
  };
  // A projection instruction: every tile of every matrix, optionally after a norm prologue.
  // With `tap` set, each tile also copies the columns it just finished (the residual stream after
  // the layer) to the drafter's tap buffer: no extra instruction, no race with the next layer.
  auto projection = [&](std::string name, const uint16_t* norm, std::vector<Tile> tiles,
                        bool accumulate, const float* input, int64_t input_stride,
                        float* tap = nullptr) {
    double cost = tile_cost(tiles);
    auto shared = std::make_shared<std::vector<Tile>>(std::move(tiles));
    int64_t count = static_cast<int64_t>(shared->size());
    const int64_t tap_stride = n_taps * H;
    add(list, {std::move(name), count, cost, {},
               [this, shared, norm, accumulate, input, input_stride, normalise, tap, tap_stride](
                   int64_t begin, int64_t end, WorkerContext& ctx) {
                 const float* x = input;
                 if (norm != nullptr) {
                   normalise(norm, ctx);
                   x = ctx.scratch;
                 }
                 for (int64_t t = begin; t < end; ++t) {
                   const Tile& tile = (*shared)[static_cast<std::size_t>(t)];
                   kernels::matmul_tile(*tile.matrix, tile.begin, tile.end, x, input_stride, rows_,
                                        {tile.out, tile.out_stride, accumulate});
                   if (tap == nullptr) continue;
                   for (int64_t r = 0; r < rows_; ++r) {
                     std::copy(tile.out + r * tile.out_stride + tile.begin,
                               tile.out + r * tile.out_stride + tile.end,
                               tap + r * tap_stride + tile.begin);
                   }
                 }
               }});
  };

  add(list, {"embed", 1, static_cast<double>(R * H * 2), {},
             [this, H](int64_t, int64_t, WorkerContext&) {
               for (int64_t r = 0; r < rows_; ++r) {
                 const uint16_t* e = weights_.embed_tokens.row(tokens_[static_cast<std::size_t>(r)]);
                 for (int64_t d = 0; d < H; ++d) hidden_[static_cast<std::size_t>(r * H + d)] = bf16_to_f32(e[d]);
               }
             }});

  if (mode_ == RowMode::kVerify) snapshots_.resize(static_cast<std::size_t>(c.num_linear_attention_layers()));

  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const Qwen38LayerWeights& lw = weights_.layers[static_cast<std::size_t>(layer)];
    std::string tag = fmt::format("L{}.", layer);
    if (!c.is_full_attention(layer)) {
      const Qwen38GdnWeights& w = lw.gdn;
      int64_t ordinal = c.linear_attention_ordinal(layer);
      if (mode_ == RowMode::kVerify) {
        auto& snaps = snapshots_[static_cast<std::size_t>(ordinal)];
        for (int64_t s = 0; s <= R; ++s) {
          snaps.push_back({ZeroedArray<float>(static_cast<std::size_t>(c.conv_dim() * history)),
                           ZeroedArray<float>(static_cast<std::size_t>(c.linear_num_value_heads * dv * dk))});
        }
      }
      float* proj = gdn_proj_.data();
      std::vector<Tile> tiles;
      add_tiles(tiles, w.in_proj_qkv, proj, gdn_width, workers);
      add_tiles(tiles, w.in_proj_z, proj + c.conv_dim(), gdn_width, workers);
      add_tiles(tiles, w.in_proj_b, proj + c.conv_dim() + c.value_dim(), gdn_width, workers);
      add_tiles(tiles, w.in_proj_a, proj + c.conv_dim() + c.value_dim() + c.linear_num_value_heads,
                gdn_width, workers);
      projection(tag + "gdn_in_proj", lw.input_layernorm, std::move(tiles), false, nullptr, H);

      double core_cost = static_cast<double>(group * dv * dk * 4 * 4 * R);
      add(list, {tag + "gdn_core", c.linear_num_key_heads, core_cost, {},
                 [this, &w, ordinal, dk, dv, group, gdn_width, history, eps, x_floats, rope_floats](
                     int64_t begin, int64_t end, WorkerContext& ctx) {
                   const Qwen38Config& cc = config_;
                   float* conv_out = ctx.scratch + x_floats + rope_floats;
                   for (int64_t kh = begin; kh < end; ++kh) {
                     int64_t j0 = kh * group;
                     // Channel ranges of this key head: its q and k, its value heads' v.
                     const int64_t ranges[3][2] = {{kh * dk, dk},
                                                   {cc.key_dim() + kh * dk, dk},
                                                   {2 * cc.key_dim() + j0 * dv, group * dv}};
                     const int64_t out_at[3] = {0, dk, 2 * dk};
                     auto snapshot = [&](Qwen38GdnState& from, int64_t slot) {
                       Qwen38GdnState& to = snapshots_[static_cast<std::size_t>(ordinal)][static_cast<std::size_t>(slot)];
                       for (const auto& range : ranges) {
                         std::memcpy(to.conv.data() + range[0] * history, from.conv.data() + range[0] * history,
                                     static_cast<std::size_t>(range[1] * history) * sizeof(float));
                       }
                       std::memcpy(to.recurrent.data() + j0 * dv * dk, from.recurrent.data() + j0 * dv * dk,
                                   static_cast<std::size_t>(group * dv * dk) * sizeof(float));
                     };
                     for (int64_t r = 0; r < rows_; ++r) {
                       Qwen38GdnState& state = states_[static_cast<std::size_t>(mode_ == RowMode::kVerify ? 0 : r)]->gdn(ordinal);
                       if (mode_ == RowMode::kVerify && r == 0) snapshot(state, 0);
                       const float* row = gdn_proj_.data() + r * gdn_width;
                       for (int i = 0; i < 3; ++i) {
                         int64_t c0 = ranges[i][0];
                         kernels::causal_conv_silu(state.conv.data() + c0 * history, w.conv1d + c0 * cc.linear_conv_kernel,
                                                   ranges[i][1], cc.linear_conv_kernel, row + c0, 1,
                                                   conv_out + out_at[i]);
                       }
                       qwen38::normalise_query_key(conv_out, conv_out + dk, dk);
                       const float* b = row + cc.conv_dim() + cc.value_dim();
                       const float* a = b + cc.linear_num_value_heads;
                       const float* z = row + cc.conv_dim();
                       for (int64_t j = j0; j < j0 + group; ++j) {
                         float beta = 0, g = 0;
                         qwen38::delta_gates(w, j, b[j], a[j], beta, g);
                         kernels::DeltaRuleRows in{conv_out, conv_out + dk, conv_out + 2 * dk + (j - j0) * dv,
                                                   dk, dv, &beta, &g, 1};
                         float* o = gdn_core_.data() + r * cc.value_dim() + j * dv;
                         kernels::gated_delta_recurrent(state.recurrent.data() + j * dv * dk, dv, dk, in, o, dv);
                         kernels::gated_rms_norm(o, z + j * dv, w.norm, dv, eps, o);
                       }
                       if (mode_ == RowMode::kVerify) snapshot(state, r + 1);
                     }
                   }
                 }});

      std::vector<Tile> out_tiles;
      add_tiles(out_tiles, w.out_proj, hidden, H, workers);
      projection(tag + "gdn_out_proj", nullptr, std::move(out_tiles), true, gdn_core_.data(), c.value_dim());
    } else {
      const Qwen38AttentionWeights& w = lw.attention;
      int64_t ordinal = c.full_attention_ordinal(layer);
      std::vector<Tile> tiles;
      add_tiles(tiles, w.q_proj, attn_q_.data(), c.q_proj_dim(), workers);
      add_tiles(tiles, w.k_proj, attn_k_.data(), c.kv_dim(), workers);
      add_tiles(tiles, w.v_proj, attn_v_.data(), c.kv_dim(), workers);
      projection(tag + "attn_in_proj", lw.input_layernorm, std::move(tiles), false, nullptr, H);

      double attn_cost = static_cast<double>(c.gqa_group() * hd * 4 * R * 512);
      add(list, {tag + "attention", c.num_key_value_heads, attn_cost, {},
                 [this, &w, ordinal, hd, eps, x_floats](int64_t begin, int64_t end, WorkerContext& ctx) {
                   const Qwen38Config& cc = config_;
                   float* cos_values = ctx.scratch + x_floats;
                   float* sin_values = cos_values + cc.rotary_dim() / 2;
                   float* scores = ctx.scratch + x_floats + cc.rotary_dim() + 2 * cc.linear_key_head_dim +
                                   cc.linear_head_group() * cc.linear_value_head_dim;
                   float scale = 1.0f / std::sqrt(static_cast<float>(hd));
                   for (int64_t kv = begin; kv < end; ++kv) {
                     // Every row's key and value are cached before any row attends (verify rows
                     // attend to earlier rows of the block).
                     for (int64_t r = 0; r < rows_; ++r) {
                       Qwen38State& state = *states_[static_cast<std::size_t>(mode_ == RowMode::kVerify ? 0 : r)];
                       int64_t position = positions_[static_cast<std::size_t>(r)];
                       rope_.angles(position, cos_values, sin_values);
                       float* key = attn_k_.data() + r * cc.kv_dim() + kv * hd;
                       qwen38::normalise_and_rotate(key, w.k_norm, hd, eps, rope_, cos_values, sin_values);
                       state.kv(ordinal).write((kv * state.capacity() + position) * hd, key,
                                               attn_v_.data() + r * cc.kv_dim() + kv * hd, hd);
                     }
                     for (int64_t r = 0; r < rows_; ++r) {
                       Qwen38State& state = *states_[static_cast<std::size_t>(mode_ == RowMode::kVerify ? 0 : r)];
                       int64_t position = positions_[static_cast<std::size_t>(r)];
                       rope_.angles(position, cos_values, sin_values);
                       for (int64_t h = kv * cc.gqa_group(); h < (kv + 1) * cc.gqa_group(); ++h) {
                         float* q = attn_q_.data() + r * cc.q_proj_dim() + h * 2 * hd;
                         const float* gate = q + hd;
                         qwen38::normalise_and_rotate(q, w.q_norm, hd, eps, rope_, cos_values, sin_values);
                         float* o = attn_out_.data() + r * cc.attn_output_dim() + h * hd;
                         state.kv(ordinal).attend(kv * state.capacity() * hd, position + 1, q, hd, scale, scores, o);
                         qwen38::apply_output_gate(o, gate, hd);
                       }
                     }
                   }
                 }});

      std::vector<Tile> out_tiles;
      add_tiles(out_tiles, w.o_proj, hidden, H, workers);
      projection(tag + "attn_out_proj", nullptr, std::move(out_tiles), true, attn_out_.data(), c.attn_output_dim());
    }

    // MLP: gate and up tiles (SiLU·mul once both halves of a tile are in), then down + residual.
    const int64_t I = c.intermediate_size;
    float* gate = mlp_act_.data();
    float* up = mlp_act_.data() + R * I;
    int64_t tile = projection_tile_rows(I, workers);
    int64_t tiles = (I + tile - 1) / tile;
    double cost = static_cast<double>(2 * tile * H * 2);
    add(list, {tag + "mlp_gate_up", tiles, cost, {},
               [this, &lw, gate, up, I, H, tile, normalise](int64_t begin, int64_t end, WorkerContext& ctx) {
                 normalise(lw.post_attention_layernorm, ctx);
                 for (int64_t t = begin; t < end; ++t) {
                   int64_t r0 = t * tile, r1 = std::min(I, r0 + tile);
                   kernels::matmul_tile(lw.gate_proj, r0, r1, ctx.scratch, H, rows_, {gate, I, false});
                   kernels::matmul_tile(lw.up_proj, r0, r1, ctx.scratch, H, rows_, {up, I, false});
                   for (int64_t r = 0; r < rows_; ++r) {
                     for (int64_t i = r0; i < r1; ++i) {
                       auto at = static_cast<std::size_t>(r * I + i);
                       gate[at] = kernels::silu(gate[at]) * up[at];
                     }
                   }
                 }
               }});
    std::vector<Tile> down_tiles;
    add_tiles(down_tiles, lw.down_proj, hidden, H, workers);
    auto tapped = std::find(tap_layers_.begin(), tap_layers_.end(), layer);
    float* tap = tapped == tap_layers_.end()
                     ? nullptr
                     : taps_.data() + (tapped - tap_layers_.begin()) * H;
    projection(tag + "mlp_down", nullptr, std::move(down_tiles), true, gate, I, tap);
  }

  // lm_head tiles with the final norm as prologue and a per-tile argmax as epilogue.
  int64_t vocab_tile = std::max<int64_t>(256, projection_tile_rows(vocab_, workers));
  int64_t vocab_tiles = (vocab_ + vocab_tile - 1) / vocab_tile;
  tile_max_.assign(static_cast<std::size_t>(vocab_tiles * R), 0.0f);
  tile_arg_.assign(static_cast<std::size_t>(vocab_tiles * R), 0);
  add(list, {"lm_head", vocab_tiles, static_cast<double>(vocab_tile * H * 2), {},
             [this, H, vocab_tile, normalise](int64_t begin, int64_t end, WorkerContext& ctx) {
               normalise(weights_.norm, ctx);
               for (int64_t t = begin; t < end; ++t) {
                 int64_t r0 = t * vocab_tile, r1 = std::min(vocab_, r0 + vocab_tile);
                 kernels::matmul_tile(weights_.lm_head, r0, r1, ctx.scratch, H, rows_, {logits_.data(), vocab_, false});
                 for (int64_t r = 0; r < rows_; ++r) {
                   const float* row = logits_.data() + r * vocab_;
                   float best = -std::numeric_limits<float>::infinity();
                   int32_t arg = static_cast<int32_t>(r0);
                   for (int64_t i = r0; i < r1; ++i) {
                     if (row[i] > best) {  // strict: ties keep the lower id; NaN never wins
                       best = row[i];
                       arg = static_cast<int32_t>(i);
                     }
                   }
                   tile_max_[static_cast<std::size_t>(t * max_rows_ + r)] = best;
                   tile_arg_[static_cast<std::size_t>(t * max_rows_ + r)] = arg;
                 }
               }
             }});
  add(list, {"argmax", 1, static_cast<double>(vocab_tiles * R), {},
             [this, vocab_tiles](int64_t, int64_t, WorkerContext&) {
               for (int64_t r = 0; r < rows_; ++r) {
                 float best = -std::numeric_limits<float>::infinity();
                 int32_t arg = 0;
                 for (int64_t t = 0; t < vocab_tiles; ++t) {
                   auto at = static_cast<std::size_t>(t * max_rows_ + r);
                   if (tile_max_[at] > best || t == 0) {
                     best = tile_max_[at];
                     arg = tile_arg_[at];
                   }
                 }
                 greedy_[static_cast<std::size_t>(r)] = arg;
               }
             }});

  program_ = std::make_unique<program::Program>(std::move(list), workers, scratch);
}

void Qwen38Step::prepare(std::span<Qwen38State* const> states, std::span<const int32_t> tokens) {
  auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > max_rows_) fail("a step of {} rows was given {} tokens", max_rows_, rows);
  bool verify = mode_ == RowMode::kVerify;
  if (static_cast<int64_t>(states.size()) != (verify ? 1 : rows)) {
    fail("a {} step needs {} sequence state(s), got {}", verify ? "verify" : "decode",
         verify ? 1 : rows, states.size());
  }
  for (int64_t r = 0; r < rows; ++r) {
    int32_t token = tokens[static_cast<std::size_t>(r)];
    if (token < 0 || token >= vocab_) fail("token id {} is outside the vocabulary (0..{})", token, vocab_ - 1);
    Qwen38State* state = states[static_cast<std::size_t>(verify ? 0 : r)];
    int64_t position = verify ? state->position() + r : state->position();
    if (position >= state->capacity() || position >= max_context_) {
      fail("context full: position {} is outside the context of {} tokens", position, state->capacity());
    }
    tokens_[static_cast<std::size_t>(r)] = token;
    states_[static_cast<std::size_t>(r)] = state;
    positions_[static_cast<std::size_t>(r)] = position;
  }
  if (!verify) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t s = 0; s < r; ++s) {
        if (states_[static_cast<std::size_t>(s)] == states_[static_cast<std::size_t>(r)]) {
          fail("independent rows {} and {} are the same sequence", s, r);
        }
      }
    }
  }
  rows_ = rows;
  verify_start_ = states[0]->position();
}

void Qwen38Step::finish() {
  if (mode_ == RowMode::kVerify) {
    states_[0]->advance(rows_);
    return;
  }
  for (int64_t r = 0; r < rows_; ++r) states_[static_cast<std::size_t>(r)]->advance(1);
}

void Qwen38Step::commit(Qwen38State& state, int64_t rows_kept) {
  if (mode_ != RowMode::kVerify) fail("commit needs a verify step");
  if (&state != states_[0] || rows_kept < 0 || rows_kept > rows_) {
    fail("commit of {} rows does not match the last verify run ({} rows)", rows_kept, rows_);
  }
  for (std::size_t ordinal = 0; ordinal < snapshots_.size(); ++ordinal) {
    const Qwen38GdnState& snap = snapshots_[ordinal][static_cast<std::size_t>(rows_kept)];
    Qwen38GdnState& live = state.gdn(static_cast<int64_t>(ordinal));
    std::memcpy(live.conv.data(), snap.conv.data(), snap.conv.bytes());
    std::memcpy(live.recurrent.data(), snap.recurrent.data(), snap.recurrent.bytes());
  }
  state.set_position(verify_start_ + rows_kept);
}

}  // namespace md
