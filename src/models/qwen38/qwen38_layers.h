// The two token mixers of a Qwen3.8 layer, applied to a block of consecutive rows of one sequence:
// Gated DeltaNet (spec §5, §8) and gated GQA attention (spec §6, §8.1).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/rope.h"
#include "models/qwen38/qwen38_config.h"
#include "models/qwen38/qwen38_options.h"
#include "models/qwen38/qwen38_state.h"
#include "models/qwen38/qwen38_weights.h"

namespace md {

struct Qwen38LayerContext {
  const Qwen38Config& config;
  const Qwen38Options& options;
  const kernels::Rope& rope;
  ThreadPool* pool;
};

// x: [rows][H] normalised input; out: [rows][H] mixer output. The state advances by `rows`
// (the caller moves the position afterwards).
void gated_deltanet_forward(const Qwen38LayerContext& ctx, const Qwen38GdnWeights& w,
                            Qwen38GdnState& state, const float* x, int64_t rows, float* out);

// Rows sit at positions first_position..first_position+rows-1; their K/V are written into the
// cache before any row attends, and row t attends to slots [0, first_position + t]. `out` is
// o_proj's product without its bias (w.o_bias), which the caller adds after the residual add, as
// the step program's residual tiles do.
void gated_attention_forward(const Qwen38LayerContext& ctx, const Qwen38AttentionWeights& w,
                             kernels::KvCache& cache, int64_t first_position, const float* x,
                             int64_t rows, float* out);

}  // namespace md
