#include "models/musespark/musespark_experts.h"

#include <algorithm>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/nvfp4.h"

namespace md {

namespace {

// Rows [first, first + rows) of expert e's stacked matrix ([E][stacked][cols]) in its format.
MuseExpertMatrix expert_rows(const MuseExperts& w, bool down, int64_t e, int64_t stacked,
                             int64_t first, int64_t rows, int64_t cols, float global) {
  const int64_t row = e * stacked + first;
  MuseExpertMatrix m;
  m.nvfp4 = w.nvfp4;
  if (!w.nvfp4) {
    m.bf16 = {(down ? w.down : w.gate_up) + row * cols, rows, cols};
  } else {
    m.fp4 = {(down ? w.down_codes : w.gate_up_codes) + row * (cols / 2),
             (down ? w.down_scales : w.gate_up_scales) + row * (cols / kernels::kNvfp4Block), rows,
             cols, global};
  }
  return m;
}

// Tiles of output rows a pool deals out: small enough to balance two to eight workers.
constexpr int64_t kRowGrain = 16;

}  // namespace

void MuseExpertMatrix::apply(const float* x, int64_t n_rows, float* y, int64_t y_stride,
                             ThreadPool* pool) const {
  const kernels::MatmulOut out{y, y_stride, false};
  auto tile = [&](int64_t begin, int64_t end) {
    if (nvfp4) {
      kernels::nvfp4_matmul_tile(fp4, begin * kRowGrain, std::min(end * kRowGrain, rows()), x,
                                 fp4.cols, n_rows, out);
    } else {
      kernels::matmul_tile(bf16, begin * kRowGrain, std::min(end * kRowGrain, rows()), x, bf16.cols,
                           n_rows, out);
    }
  };
  const int64_t tiles = (rows() + kRowGrain - 1) / kRowGrain;
  if (pool == nullptr) {
    tile(0, tiles);
  } else {
    pool->parallel_for(tiles, tile);
  }
}

MuseExpertWeights muse_expert_weights(const MuseExperts& w, const MuseSparkConfig& c,
                                      int64_t expert) {
  const int64_t inter = c.moe_intermediate_size, hm = c.moe_hidden_size;
  const int64_t e = w.stored_experts > 0 ? expert % w.stored_experts : expert;
  const auto global = [](const std::vector<float>& g, int64_t i) {
    return g.empty() ? 1.0f : g[static_cast<std::size_t>(i)];
  };
  return {
      expert_rows(w, false, e, 2 * inter, 0, inter, hm, global(w.gate_up_global, 2 * e)),
      expert_rows(w, false, e, 2 * inter, inter, inter, hm, global(w.gate_up_global, 2 * e + 1)),
      expert_rows(w, true, e, hm, 0, hm, inter, global(w.down_global, e))};
}

}  // namespace md
