#include "program/cpu_window_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention_runs.h"
#include "kernels/norms.h"
#include "program/cpu_ring_append.h"

namespace md::program {

namespace {

// cos | sin of `position` into `angles`.
void angles_at(const WindowAttentionOperands& op, int64_t position, float* angles) {
  op.rope->angles(position, angles, angles + op.rope->rotary_dim() / 2);
}

// A query or key head: plain RMSNorm over the head, then RoPE at the angles.
void normalise_and_rotate(const WindowAttentionOperands& op, const uint16_t* norm, float* head,
                          const float* angles) {
  kernels::rms_norm(head, norm, op.head_dim, op.norm_eps, kernels::NormWeight::kPlain, head);
  op.rope->apply(head, angles, angles + op.rope->rotary_dim() / 2);
}

// The new context rows (at the positions just before the block) of head g into the ring.
void store_context_keys(const WindowAttentionOperands& op, int64_t g, const Program& program,
                        const kernels::KvRing& ring, float* angles) {
  const int64_t rows = program.count(op.context_rows_from);
  const RingAppendOperands store{.k = op.context_k,
                                 .v = op.context_v,
                                 .kv_stride = op.kv_stride,
                                 .rows_from = op.context_rows_from,
                                 .kv_heads = op.kv_heads,
                                 .head_dim = op.head_dim,
                                 .k_norm = op.k_norm,
                                 .norm_eps = op.norm_eps,
                                 .rope = op.rope,
                                 .layer = op.layer};
  append_ring_rows(store, g, program.row(0).position - rows, rows, program.buffer(op.context_k),
                   program.buffer(op.context_v), ring, angles);
}

// The block's keys of head g and its group's queries, each at its row's position.
void rotate_block(const WindowAttentionOperands& op, int64_t g, const Program& program,
                  float* angles) {
  const int64_t group = op.heads / op.kv_heads, hd = op.head_dim;
  float* q = program.buffer(op.q);
  float* k = program.buffer(op.k);
  for (int64_t t = 0; t < program.rows(); ++t) {
    angles_at(op, program.row(t).position, angles);
    normalise_and_rotate(op, op.k_norm, k + t * op.kv_stride + g * hd, angles);
    for (int64_t head = g * group; head < (g + 1) * group; ++head) {
      normalise_and_rotate(op, op.q_norm, q + t * op.q_stride + head * hd, angles);
    }
  }
}

// Every block row t of every query head of the group over the context positions within the
// window before the block and the block rows within the window on either side of t (causal: the
// window before the block's first row, and the block rows up to t).
void attend_block(const WindowAttentionOperands& op, int64_t g, const Program& program,
                  const kernels::KvRing& ring, float* scores) {
  const int64_t group = op.heads / op.kv_heads, hd = op.head_dim, rows = program.rows();
  const int64_t start = program.row(0).position;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* q = program.buffer(op.q);
  const float* k = program.buffer(op.k);
  const float* v = program.buffer(op.v);
  float* out = program.buffer(op.out);
  kernels::KeyRun runs[kernels::KvRing::kMaxRuns + 1];
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t first = op.causal ? start - op.window : start + t - op.window + 1;
    int64_t count = ring.runs(g, first, start, runs);
    const kernels::BlockRows visible =
        op.causal ? kernels::BlockRows{0, t} : kernels::visible_block_rows(t, rows, op.window);
    const int64_t offset = visible.first * op.kv_stride + g * hd;
    runs[count++] =
        kernels::KeyRun{k + offset, v + offset, visible.last - visible.first + 1, op.kv_stride};
    for (int64_t head = g * group; head < (g + 1) * group; ++head) {
      kernels::attend_runs(q + t * op.q_stride + head * hd,
                           std::span<const kernels::KeyRun>(runs, static_cast<std::size_t>(count)),
                           hd, scale, scores, out + t * op.q_stride + head * hd);
    }
  }
}

}  // namespace

void run_window_attention_kv_head(const WindowAttentionOperands& op, int64_t g,
                                  const Program& program, float* scratch) {
  const kernels::KvRing ring = program.row(0).state->kv_ring(op.layer);
  float* angles = scratch;
  store_context_keys(op, g, program, ring, angles);
  rotate_block(op, g, program, angles);
  attend_block(op, g, program, ring, scratch + op.head_dim);
}

}  // namespace md::program
