#include "models/llama/llama_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "kernels/activations.h"
#include "kernels/attention.h"
#include "kernels/gguf_dequant.h"
#include "kernels/gguf_matmul.h"
#include "models/llama/llama_math.h"
#include "program/projection_tiles.h"

namespace md {

using program::Instruction;
using program::WorkerContext;

namespace {

// Tiles start at multiples of this: a multiple of every GGUF kernel path's register block, so no
// tile pays for a ragged block (results do not depend on the split, only speed does).
constexpr int64_t kRowGrain = 16;
// lm_head tiles are larger: the vocabulary has hundreds of them even so, and the per-tile argmax
// results the final reduction reads stay few.
constexpr int64_t kMinVocabTile = 256;

int64_t tile_rows(int64_t rows, int workers) {
  return program::projection_tile_rows(rows, workers, kRowGrain);
}

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

void add_tiles(std::vector<llama::ProjectionTile>& tiles, const GgufMatrix& w, float* out,
               int64_t out_stride, bool accumulate, int workers) {
  int64_t tile = tile_rows(w.rows, workers);
  for (int64_t r = 0; r < w.rows; r += tile) {
    tiles.push_back({&w, r, std::min(w.rows, r + tile), out, out_stride, accumulate});
  }
}

double mean_tile_bytes(const std::vector<llama::ProjectionTile>& tiles) {
  double bytes = 0;
  for (const llama::ProjectionTile& t : tiles) {
    bytes += static_cast<double>(t.end - t.begin) * static_cast<double>(t.w->row_bytes);
  }
  return bytes / static_cast<double>(tiles.size());
}

}  // namespace

LlamaStep::LlamaStep(const LlamaConfig& config, const LlamaGgufWeights& weights,
                     const std::vector<float>& inv_freq, int64_t max_rows, int workers,
                     int64_t max_context)
    : config_(config),
      weights_(weights),
      inv_freq_(inv_freq),
      max_rows_(max_rows),
      vocab_(config.vocab_size),
      max_context_(max_context) {
  if (max_rows < 1 || max_rows > kMaxRows) {
    fail("a step takes 1..{} rows, not {}", kMaxRows, max_rows);
  }
  build(workers);
}

void LlamaStep::add(Instructions& list, std::string name, int64_t tasks, double cost_per_task,
                    program::TaskBody body) {
  // A chain: every instruction reads what the one before it wrote, and a task only starts once
  // its predecessor is complete, so waiting on the previous instruction orders all earlier ones.
  std::vector<int32_t> depends_on;
  if (!list.empty()) depends_on.push_back(static_cast<int32_t>(list.size() - 1));
  list.push_back({std::move(name), tasks, cost_per_task, std::move(depends_on), std::move(body)});
}

void LlamaStep::build(int workers) {
  const LlamaConfig& c = config_;
  const int64_t R = max_rows_, H = c.hidden_size, I = c.intermediate_size;
  hidden_.assign(size(R * H), 0.0f);
  q_.assign(size(R * c.q_dim()), 0.0f);
  k_.assign(size(R * c.kv_dim()), 0.0f);
  v_.assign(size(R * c.kv_dim()), 0.0f);
  attended_.assign(size(R * c.q_dim()), 0.0f);
  gate_.assign(size(R * I), 0.0f);
  up_.assign(size(R * I), 0.0f);
  rope_.assign(size(R * c.head_dim), 0.0f);

  Instructions list;
  // One task per row: the token's embedding into the residual stream and the RoPE angles of its
  // position, which every layer's attention reuses.
  add(list, "embed+rope", R, static_cast<double>(weights_.embedding.row_bytes),
      [this](int64_t begin, int64_t end, WorkerContext&) { embed(begin, end); });
  for (int64_t layer = 0; layer < c.num_layers; ++layer) add_layer(list, layer, workers);
  add_lm_head(list, workers);
  // Worker scratch: the normalised input rows, then one query's attention scores.
  program_ =
      std::make_unique<program::Program>(std::move(list), workers, size(R * H + max_context_));
}

void LlamaStep::add_projection(Instructions& list, std::string name, const std::vector<float>* norm,
                               std::vector<Tile> tiles, const float* input, int64_t input_stride) {
  double cost = mean_tile_bytes(tiles);
  auto count = static_cast<int64_t>(tiles.size());
  auto shared = std::make_shared<const std::vector<Tile>>(std::move(tiles));
  auto body = [this, shared, norm, input, input_stride](int64_t begin, int64_t end,
                                                        WorkerContext& ctx) {
    const float* x = input;
    if (norm != nullptr) {
      normalise(*norm, ctx.scratch);  // once per worker, not per tile
      x = ctx.scratch;
    }
    for (int64_t t = begin; t < end; ++t) {
      const Tile& tile = (*shared)[size(t)];
      kernels::gguf_matmul_tile(*tile.w, tile.begin, tile.end, x, input_stride, rows_,
                                {tile.out, tile.out_stride, tile.accumulate});
    }
  };
  add(list, std::move(name), count, cost, std::move(body));
}

void LlamaStep::add_layer(Instructions& list, int64_t layer, int workers) {
  const LlamaConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const LlamaLayerWeights& w = weights_.layers[size(layer)];
  const std::string tag = fmt::format("L{}.", layer);

  std::vector<Tile> qkv;
  add_tiles(qkv, w.q, q_.data(), c.q_dim(), false, workers);
  add_tiles(qkv, w.k, k_.data(), c.kv_dim(), false, workers);
  add_tiles(qkv, w.v, v_.data(), c.kv_dim(), false, workers);
  add_projection(list, tag + "norm>qkv", &w.attn_norm, std::move(qkv), nullptr, H);

  const double attention_cost = static_cast<double>(c.gqa_group() * c.head_dim * max_rows_ * 2048);
  add(list, tag + "attention", c.num_key_value_heads, attention_cost,
      [this, layer](int64_t begin, int64_t end, WorkerContext& ctx) {
        attend(layer, begin, end, ctx.scratch);
      });

  std::vector<Tile> o;
  add_tiles(o, w.o, hidden_.data(), H, true, workers);
  add_projection(list, tag + "o+residual", nullptr, std::move(o), attended_.data(), c.q_dim());

  // Gate and up tiles of the same rows together, so that SiLU·mul runs as their epilogue.
  const int64_t tile = tile_rows(I, workers);
  const double gate_up_cost = static_cast<double>(tile) * static_cast<double>(2 * w.gate.row_bytes);
  add(list, tag + "norm>gate|up+silu", (I + tile - 1) / tile, gate_up_cost,
      [this, &w, tile](int64_t begin, int64_t end, WorkerContext& ctx) {
        gate_up(w, tile, begin, end, ctx.scratch);
      });

  std::vector<Tile> down;
  add_tiles(down, w.down, hidden_.data(), H, true, workers);
  add_projection(list, tag + "down+residual", nullptr, std::move(down), gate_.data(), I);
}

void LlamaStep::add_lm_head(Instructions& list, int workers) {
  const int64_t tile = std::max(kMinVocabTile, tile_rows(vocab_, workers));
  const int64_t tiles = (vocab_ + tile - 1) / tile;
  tile_max_.assign(size(tiles * max_rows_), 0.0f);
  tile_arg_.assign(size(tiles * max_rows_), 0);
  add(list, "norm>lm_head+argmax", tiles,
      static_cast<double>(tile) * static_cast<double>(weights_.output.row_bytes),
      [this, tile](int64_t begin, int64_t end, WorkerContext& ctx) {
        lm_head(tile, begin, end, ctx.scratch);
      });
  add(list, "argmax", 1, static_cast<double>(tiles * max_rows_),
      [this, tiles](int64_t, int64_t, WorkerContext&) { argmax(tiles); });
}

void LlamaStep::normalise(const std::vector<float>& w, float* scratch) const {
  llama::rms_norm_rows(hidden_.data(), w, rows_, config_.hidden_size,
                       static_cast<float>(config_.rms_norm_eps), scratch);
}

void LlamaStep::embed(int64_t begin, int64_t end) {
  const int64_t H = config_.hidden_size, hd = config_.head_dim;
  const GgufMatrix& e = weights_.embedding;
  for (int64_t r = begin; r < std::min(end, rows_); ++r) {
    (void)kernels::dequantize_row(e.type, e.row(tokens_[size(r)]), hidden_.data() + r * H, H);
    float* angles = rope_.data() + r * hd;
    llama::rope_angles(positions_[size(r)], inv_freq_, angles, angles + hd / 2);
  }
}

void LlamaStep::attend(int64_t layer, int64_t begin, int64_t end, float* scratch) {
  const LlamaConfig& c = config_;
  const int64_t hd = c.head_dim;
  const auto li = size(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* scores = scratch + max_rows_ * c.hidden_size;
  for (int64_t g = begin; g < end; ++g) {
    // Every row's key and value are cached before any row attends, so that rows of one sequence
    // (should a step ever take them) would see each other.
    for (int64_t r = 0; r < rows_; ++r) {
      LlamaState& state = *states_[size(r)];
      const float* angles = rope_.data() + r * hd;
      float* key = k_.data() + r * c.kv_dim() + g * hd;
      llama::rope_adjacent(key, hd, angles, angles + hd / 2);
      const int64_t at = (g * state.capacity() + positions_[size(r)]) * hd;
      std::memcpy(state.keys[li].data() + at, key, size(hd) * sizeof(float));
      std::memcpy(state.values[li].data() + at, v_.data() + r * c.kv_dim() + g * hd,
                  size(hd) * sizeof(float));
    }
    for (int64_t r = 0; r < rows_; ++r) {
      LlamaState& state = *states_[size(r)];
      const float* angles = rope_.data() + r * hd;
      const int64_t head = g * state.capacity() * hd;
      for (int64_t h = g * c.gqa_group(); h < (g + 1) * c.gqa_group(); ++h) {
        float* q = q_.data() + r * c.q_dim() + h * hd;
        llama::rope_adjacent(q, hd, angles, angles + hd / 2);
        kernels::attend(q, state.keys[li].data() + head, state.values[li].data() + head,
                        positions_[size(r)] + 1, hd, hd, scale, scores,
                        attended_.data() + r * c.q_dim() + h * hd);
      }
    }
  }
}

void LlamaStep::gate_up(const LlamaLayerWeights& w, int64_t tile, int64_t begin, int64_t end,
                        float* scratch) {
  const int64_t H = config_.hidden_size, I = config_.intermediate_size;
  normalise(w.ffn_norm, scratch);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t r0 = t * tile, r1 = std::min(I, r0 + tile);
    kernels::gguf_matmul_tile(w.gate, r0, r1, scratch, H, rows_, {gate_.data(), I, false});
    kernels::gguf_matmul_tile(w.up, r0, r1, scratch, H, rows_, {up_.data(), I, false});
    for (int64_t r = 0; r < rows_; ++r) {
      for (int64_t i = r * I + r0; i < r * I + r1; ++i) {
        gate_[size(i)] = kernels::silu(gate_[size(i)]) * up_[size(i)];
      }
    }
  }
}

void LlamaStep::lm_head(int64_t tile, int64_t begin, int64_t end, float* scratch) {
  normalise(weights_.output_norm, scratch);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t r0 = t * tile, r1 = std::min(vocab_, r0 + tile);
    kernels::gguf_matmul_tile(weights_.output, r0, r1, scratch, config_.hidden_size, rows_,
                              {logits_, vocab_, false});
    for (int64_t r = 0; r < rows_; ++r) {
      const float* row = logits_ + r * vocab_;
      float best = -std::numeric_limits<float>::infinity();
      auto arg = static_cast<int32_t>(r0);
      for (int64_t i = r0; i < r1; ++i) {
        if (row[i] > best) {  // strict: ties keep the lower id; NaN never wins
          best = row[i];
          arg = static_cast<int32_t>(i);
        }
      }
      tile_max_[size(t * max_rows_ + r)] = best;
      tile_arg_[size(t * max_rows_ + r)] = arg;
    }
  }
}

void LlamaStep::argmax(int64_t tiles) {
  for (int64_t r = 0; r < rows_; ++r) {
    float best = 0;
    int32_t arg = 0;
    for (int64_t t = 0; t < tiles; ++t) {
      const auto at = size(t * max_rows_ + r);
      if (t == 0 || tile_max_[at] > best) {  // strict: the earlier tile (lower ids) wins ties
        best = tile_max_[at];
        arg = tile_arg_[at];
      }
    }
    greedy_[size(r)] = arg;
  }
}

void LlamaStep::prepare(std::span<LlamaState* const> states, std::span<const int32_t> tokens,
                        float* logits) {
  const auto rows = static_cast<int64_t>(tokens.size());
  if (rows < 1 || rows > max_rows_ || states.size() != tokens.size()) {
    fail("a step of {} rows was given {} sequences and {} tokens", max_rows_, states.size(),
         tokens.size());
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t token = tokens[size(r)];
    if (token < 0 || token >= vocab_) {
      fail("token id {} is outside the vocabulary (0..{})", token, vocab_ - 1);
    }
    const LlamaState* state = states[size(r)];
    if (state->position() >= state->capacity() || state->position() >= max_context_) {
      fail("context full: {} tokens already in a sequence of context {} (raise --context)",
           state->position(), state->capacity());
    }
    for (int64_t s = 0; s < r; ++s) {
      if (states[size(s)] == state) fail("decode: the same sequence appears twice in one step");
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    tokens_[size(r)] = tokens[size(r)];
    states_[size(r)] = states[size(r)];
    positions_[size(r)] = states[size(r)]->position();
  }
  rows_ = rows;
  logits_ = logits;
}

void LlamaStep::finish() {
  for (int64_t r = 0; r < rows_; ++r) states_[size(r)]->advance(1);
}

}  // namespace md
