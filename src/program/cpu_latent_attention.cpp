#include "program/cpu_latent_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/latent_attention.h"
#include "kernels/norms.h"

namespace md::program {

namespace {

// A worker's widened cache rows and softmax scores: sized by the longest context a task has
// attended over (it grows with the context, so it is not part of the fixed worker scratch).
struct WidenedRows {
  std::vector<float> rows, scores;
};
thread_local WidenedRows widened_of_worker;

// Cache rows [0, positions) as f32: in place, or widened from bf16 (exactly) into `widened`.
const float* cache_rows(const LatentRows& cache, int64_t positions, WidenedRows& widened) {
  if (cache.f32 != nullptr) return cache.f32;
  const auto floats = static_cast<std::size_t>(positions * cache.width);
  if (widened.rows.size() < floats) widened.rows.resize(floats);
  for (std::size_t i = 0; i < floats; ++i) widened.rows[i] = bf16_to_f32(cache.bf16[i]);
  return widened.rows.data();
}

}  // namespace

void run_latent_append_row(const LatentAttentionOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  const StepRow& step_row = program.row(row);
  const LatentRows cache = step_row.state->latent_rows(op.cache_slot);
  const float* ckv = program.buffer(op.ckv) + row * op.ckv_stride();
  const int64_t width = op.ckv_stride();
  // The normed latent, then the shared key part as it is.
  if (cache.f32 != nullptr) {
    float* out = cache.f32 + step_row.position * width;
    kernels::rms_norm(ckv, op.latent_norm, op.rank, op.norm_eps, out);
    std::copy(ckv + op.rank, ckv + width, out + op.rank);
    return;
  }
  std::vector<float>& normed = widened_of_worker.rows;  // free between tasks
  if (normed.size() < static_cast<std::size_t>(op.rank))
    normed.resize(static_cast<std::size_t>(op.rank));
  kernels::rms_norm(ckv, op.latent_norm, op.rank, op.norm_eps, normed.data());
  uint16_t* out = cache.bf16 + step_row.position * width;
  for (int64_t i = 0; i < op.rank; ++i) out[i] = f32_to_bf16(normed[static_cast<std::size_t>(i)]);
  for (int64_t i = op.rank; i < width; ++i) out[i] = f32_to_bf16(ckv[i]);
}

void run_latent_attention_head(const LatentAttentionOperands& op, int64_t head,
                               const Program& program, float* scratch) {
  const int64_t rank = op.rank, shared = op.shared, nope = op.nope, v = op.v_head_dim;
  const int64_t qk = nope + shared;
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
  float* absorbed = scratch;                      // [rank + shared]
  float* context = scratch + rank + shared;       // [rank]
  float* expanded = scratch + 2 * rank + shared;  // [kv_b rows]
  const kernels::WeightMatrix key_absorb =
      kernels::f32_weight_matrix(op.key_absorb + head * rank * nope, rank, nope);
  const int64_t first = head * (nope + v) + nope;  // W_UV_h: the head's value rows
  WidenedRows& widened = widened_of_worker;
  for (int64_t n = 0; n < program.rows(); ++n) {
    const StepRow& row = program.row(n);
    const float* q = program.buffer(op.q) + n * op.q_stride() + head * qk;
    kernels::matmul(key_absorb, q, 1, absorbed, nullptr);
    std::copy(q + nope, q + qk, absorbed + rank);
    const int64_t positions = row.position + 1;
    const float* rows = cache_rows(row.state->latent_rows(op.cache_slot), positions, widened);
    if (widened.scores.size() < static_cast<std::size_t>(positions)) {
      widened.scores.resize(static_cast<std::size_t>(positions));
    }
    kernels::latent_attention(absorbed, 1, rank, shared, rows, positions, scale,
                              widened.scores.data(), context);
    kernels::weight_tile(op.kv_b, first, first + v, context, rank, 1, {expanded, 0, false});
    const float* gate = program.buffer(op.gate) + n * op.out_stride() + head * v;
    float* out = program.buffer(op.out) + n * op.out_stride() + head * v;
    for (int64_t j = 0; j < v; ++j) out[j] = expanded[first + j] * kernels::sigmoid(gate[j]);
  }
}

}  // namespace md::program
