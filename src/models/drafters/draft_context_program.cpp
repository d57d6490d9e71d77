#include "models/drafters/draft_context_program.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"
#include "models/common/step_builder.h"
#include "models/drafters/draft_step_parts.h"

namespace md {

namespace {

using program::Dependency;
using program::RowCount;

// Count register 0 counts the rows whose features a run computes, register 1 those it keys.
constexpr RowCount kFeatureRows = 0;
constexpr RowCount kKeyRows = 1;

std::size_t size(int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

DraftContextProgram::DraftContextProgram(const DraftContextSpec& spec, const kernels::Rope& rope,
                                         int workers, Run run)
    : run_(std::move(run)),
      k_(size(spec.num_layers()), std::vector<float>(size(kMaxRows * spec.kv_dim()))),
      v_(size(spec.num_layers()), std::vector<float>(size(kMaxRows * spec.kv_dim()))) {
  StepBuilder b(workers);
  const draft_step::ContextRows rows{.taps = b.buffer(nullptr),
                                     .features = b.buffer(nullptr),
                                     .k = program::kNoBuffer,
                                     .v = program::kNoBuffer,
                                     .count = kFeatureRows};
  taps_ = rows.taps;
  features_ = rows.features;
  key_features_ = b.buffer(nullptr);
  const int32_t fc = draft_step::context_fc(b, spec, rows);
  // The keyed rows may be rows this run just normalised.
  const int32_t normed = draft_step::context_norm(b, spec, rows, fc, kMaxRows);
  program::RowInput features = StepBuilder::rows(key_features_, spec.hidden_size);
  features.rows_from = kKeyRows;
  const int64_t kv_dim = spec.kv_dim(), hd = spec.head_dim;
  for (int64_t l = 0; l < spec.num_layers(); ++l) {
    const DraftContextLayer& layer = spec.layers[size(l)];
    const program::BufferId k = b.buffer(k_[size(l)]), v = b.buffer(v_[size(l)]);
    std::vector<program::Tile> tiles;
    b.add_tiles(tiles, kernels::WeightMatrix::of(*layer.k_proj), k, 0, kv_dim, false);
    b.add_tiles(tiles, kernels::WeightMatrix::of(*layer.v_proj), v, 0, kv_dim, false);
    const std::string name = "context_layer" + std::to_string(l);
    const int32_t kv = b.projection(name + ".k|v", features, std::move(tiles), {b.all(normed)});
    std::vector<std::vector<Dependency>> head_waits;
    for (int64_t g = 0; g < spec.kv_heads; ++g) {
      std::vector<Dependency> reads = b.tiles_writing(kv, k, g * hd, (g + 1) * hd);
      std::vector<Dependency> value = b.tiles_writing(kv, v, g * hd, (g + 1) * hd);
      reads.insert(reads.end(), value.begin(), value.end());
      head_waits.push_back(std::move(reads));
    }
    const program::RingAppendOperands ring{.k = k,
                                           .v = v,
                                           .kv_stride = kv_dim,
                                           .rows_from = kKeyRows,
                                           .kv_heads = spec.kv_heads,
                                           .head_dim = hd,
                                           .k_norm = layer.k_norm,
                                           .norm_eps = spec.eps,
                                           .rope = &rope,
                                           .layer = l};
    b.add({name + ".ring_append", spec.kv_heads, ring, {}, std::move(head_waits)});
  }
  program_ = b.build(size(rope.rotary_dim()), kMaxRows);
}

void DraftContextProgram::features(DraftContext& context, const float* taps, int64_t first,
                                   int64_t rows) {
  // The program only reads the taps. The keyed rows are none: their buffer is only named.
  program_->rebind(taps_, const_cast<float*>(taps));
  program_->rebind(features_, context.feature_row(first));
  program_->rebind(key_features_, context.feature_row(first));
  run_once(context, first, rows, 0);
}

void DraftContextProgram::keys(DraftContext& context, int64_t first, int64_t rows) {
  // No features are computed: their buffers are only named.
  program_->rebind(taps_, context.feature_row(first));
  program_->rebind(features_, context.feature_row(first));
  program_->rebind(key_features_, context.feature_row(first));
  run_once(context, first, 0, rows);
  context.mark_keys(first, first + rows);
}

void DraftContextProgram::run_once(DraftContext& context, int64_t position, int64_t feature_rows,
                                   int64_t key_rows) {
  if (feature_rows > kMaxRows || key_rows > kMaxRows) {
    fail("a draft context program takes at most {} rows, not {}", kMaxRows,
         std::max(feature_rows, key_rows));
  }
  const program::StepRow start{0, position, &context};
  program_->set_rows(std::span<const program::StepRow>(&start, 1));
  program_->set_count(kFeatureRows, feature_rows);
  program_->set_count(kKeyRows, key_rows);
  run_(*program_);
  ++runs_;
}

}  // namespace md
