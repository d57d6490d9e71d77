#include "models/musespark/musespark_experts.h"

#include "kernels/nvfp4.h"

namespace md {

namespace {

// Rows [first, first + rows) of storage slot e's stacked matrix ([E][stacked][cols]) in the
// layer's format.
kernels::WeightMatrix expert_rows(const MuseExperts& w, bool down, int64_t e, int64_t stacked,
                                  int64_t first, int64_t rows, int64_t cols, float global) {
  const int64_t row = e * stacked + first;
  if (!w.nvfp4) {
    return kernels::WeightMatrix::of(
        kernels::Bf16Matrix{(down ? w.down : w.gate_up) + row * cols, rows, cols});
  }
  return kernels::WeightMatrix::of(kernels::Nvfp4Matrix{
      (down ? w.down_codes : w.gate_up_codes) + row * (cols / 2),
      (down ? w.down_scales : w.gate_up_scales) + row * (cols / kernels::kNvfp4Block), rows, cols,
      global});
}

}  // namespace

kernels::ExpertMatrices muse_expert_matrices(const MuseExperts& w, const MuseSparkConfig& c) {
  const int64_t inter = c.moe_intermediate_size, hm = c.moe_hidden_size;
  const auto global = [](const std::vector<float>& g, int64_t i) {
    return g.empty() ? 1.0f : g[static_cast<std::size_t>(i)];
  };
  kernels::ExpertMatrices m;
  for (int64_t expert = 0; expert < c.num_experts; ++expert) {
    const int64_t e = w.stored_experts > 0 ? expert % w.stored_experts : expert;
    m.gate.push_back(
        expert_rows(w, false, e, 2 * inter, 0, inter, hm, global(w.gate_up_global, 2 * e)));
    m.up.push_back(
        expert_rows(w, false, e, 2 * inter, inter, inter, hm, global(w.gate_up_global, 2 * e + 1)));
    m.down.push_back(expert_rows(w, true, e, hm, 0, hm, inter, global(w.down_global, e)));
  }
  return m;
}

}  // namespace md
