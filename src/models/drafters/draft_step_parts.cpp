#include "models/drafters/draft_step_parts.h"

#include <utility>

#include "base/error.h"

namespace md::draft_step {

using kernels::WeightMatrix;

NewContextRows::NewContextRows(int64_t kv_dim)
    : k_(static_cast<std::size_t>(kMaxNewContextRows * kv_dim)),
      v_(static_cast<std::size_t>(kMaxNewContextRows * kv_dim)) {}

const ContextRows& NewContextRows::bind(StepBuilder& b) {
  ids_ = {.taps = b.buffer(nullptr),
          .features = b.buffer(nullptr),
          .k = b.buffer(k_),
          .v = b.buffer(v_),
          .count = 0};
  return ids_;
}

void NewContextRows::begin(program::Program& program, DraftContext& context, int32_t anchor,
                           int32_t mask, int64_t block_rows, const float* new_taps,
                           int64_t new_rows, int64_t window_keys) {
  if (new_rows < 0 || new_rows > kMaxNewContextRows) {
    fail("a draft round folds in 0..{} new context rows, not {}", kMaxNewContextRows, new_rows);
  }
  start_ = context.length() + new_rows;
  context.prepare_keys(start_ - window_keys);  // the older positions: the program adds the new
  context_ = &context;
  first_new_ = context.extend(new_rows);
  std::vector<program::StepRow> block(static_cast<std::size_t>(block_rows));
  for (int64_t t = 0; t < block_rows; ++t) {
    block[static_cast<std::size_t>(t)] = {t == 0 ? anchor : mask, start_ + t, &context};
  }
  program.set_rows(block);
  program.set_count(ids_.count, new_rows);
  // The program reads the taps and writes the new features in the context's own storage (whose
  // address moves as the context grows); it never writes through the taps.
  program.rebind(ids_.taps, const_cast<float*>(new_taps));
  program.rebind(ids_.features, context.feature_row(first_new_));
}

void NewContextRows::finish() {
  context_->mark_keys(first_new_, start_);
}

int32_t context_fc(StepBuilder& b, const DraftContextSpec& spec, const ContextRows& rows) {
  program::RowInput taps = StepBuilder::rows(rows.taps, spec.fc_in_features());
  taps.rows_from = rows.count;
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, WeightMatrix::of(*spec.fc), rows.features, 0, spec.hidden_size, false);
  return b.projection("context_fc", taps, std::move(tiles), {});
}

int32_t context_norm(StepBuilder& b, const DraftContextSpec& spec, const ContextRows& rows,
                     int32_t fc, int64_t max_rows) {
  program::NormRowsOperands op{rows.features,    spec.hidden_size, program::NormKind::kBf16Plain,
                               spec.hidden_norm, spec.eps,         rows.count};
  return b.add({"context_hidden_norm", max_rows, op, {b.all(fc)}, {}});
}

int32_t qkv(StepBuilder& b, std::string name, program::RowInput input,
            const DraftLayerWeights& layer, const Qkv& out, const ContextRows& rows,
            std::vector<program::Dependency> waits) {
  program::RowInput context = StepBuilder::rows(rows.features, input.stride);
  context.rows_from = rows.count;
  std::vector<program::Tile> tiles;
  b.add_tiles(tiles, WeightMatrix::of(layer.q_proj), out.q, 0, out.q_dim, false);
  const std::size_t first_k = tiles.size();
  b.add_tiles(tiles, WeightMatrix::of(layer.k_proj), out.k, 0, out.kv_dim, false);
  const std::size_t first_v = tiles.size();
  b.add_tiles(tiles, WeightMatrix::of(layer.v_proj), out.v, 0, out.kv_dim, false);
  for (std::size_t t = first_k; t < tiles.size(); ++t) {
    tiles[t].extra_out = t < first_v ? rows.k : rows.v;
    tiles[t].extra_stride = out.kv_dim;
  }
  const auto tasks = static_cast<int64_t>(tiles.size());
  return b.add({std::move(name),
                tasks,
                program::ProjectionOperands{input, std::move(tiles), context},
                std::move(waits),
                {}});
}

int32_t window_attention(StepBuilder& b, std::string name,
                         const program::WindowAttentionOperands& op, int32_t qkv) {
  const int64_t hd = op.head_dim, group = op.heads / op.kv_heads;
  std::vector<std::vector<program::Dependency>> head_waits;
  for (int64_t g = 0; g < op.kv_heads; ++g) {
    std::vector<program::Dependency> reads =
        b.tiles_writing(qkv, op.q, g * group * hd, (g + 1) * group * hd);
    for (program::BufferId kv : {op.k, op.v}) {
      auto tiles = b.tiles_writing(qkv, kv, g * hd, (g + 1) * hd);
      reads.insert(reads.end(), tiles.begin(), tiles.end());
    }
    head_waits.push_back(std::move(reads));
  }
  return b.add({std::move(name), op.kv_heads, op, {}, std::move(head_waits)});
}

}  // namespace md::draft_step
