// One routed expert's matrices as views in their format: the gate half and the up half of
// gate_up (each NVFP4 half with its own global scale) and down, for the reference MoE and tests.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/bf16_matrix.h"
#include "kernels/nvfp4_matmul.h"
#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_weights.h"

namespace md {

struct MuseExpertMatrix {
  bool nvfp4 = false;
  kernels::Bf16Matrix bf16;
  kernels::Nvfp4Matrix fp4;

  int64_t rows() const { return nvfp4 ? fp4.rows : bf16.rows; }
  int64_t cols() const { return nvfp4 ? fp4.cols : bf16.cols; }
  // y[n·y_stride + r] = Σ_c W[r][c] · x[n·cols + c] for n < n_rows, the output rows split over
  // `pool` (may be null; a split never changes a result).
  void apply(const float* x, int64_t n_rows, float* y, int64_t y_stride, ThreadPool* pool) const;
};

struct MuseExpertWeights {
  MuseExpertMatrix gate, up, down;
};

MuseExpertWeights muse_expert_weights(const MuseExperts& w, const MuseSparkConfig& c, int64_t e);

}  // namespace md
