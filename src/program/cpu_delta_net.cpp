#include "program/cpu_delta_net.h"

#include <cstring>

#include "kernels/causal_conv.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/norms.h"

namespace md::program {

namespace {

std::size_t at(int64_t i) {
  return static_cast<std::size_t>(i);
}

// Calls fn(first, count) for each run of conv channels key head kh reads, in the order its conv
// outputs are laid out: its q, its k, then its value heads' v. Adjacent value heads (the grouped
// layout) make one run; in the tiled layout each is its own. Nothing is allocated: this runs
// for every key head of every row of the step.
template <typename Fn>
void for_each_channel_run(const DeltaNetOperands& op, int64_t kh, Fn fn) {
  const int64_t dk = op.key_dim, dv = op.value_dim, key_width = op.key_heads * dk;
  fn(kh * dk, dk);
  fn(key_width + kh * dk, dk);
  int64_t first = 0, count = 0;
  for (int64_t m = 0; m < op.group(); ++m) {
    const int64_t at_v = 2 * key_width + op.value_head(kh, m) * dv;
    if (count > 0 && at_v == first + count) {
      count += dv;
      continue;
    }
    if (count > 0) fn(first, count);
    first = at_v, count = dv;
  }
  fn(first, count);
}

// Copies the part of a state that key head kh owns (its conv channels, its value heads'
// matrices): heads never share state, so snapshots and live state are written head by head.
void copy_head_state(const DeltaNetOperands& op, int64_t kh, const RecurrentState& from,
                     const RecurrentState& to) {
  const int64_t history = op.conv_kernel - 1;
  for_each_channel_run(op, kh, [&](int64_t first, int64_t count) {
    std::memcpy(to.conv + first * history, from.conv + first * history,
                at(count * history) * sizeof(float));
  });
  const int64_t matrix = op.value_dim * op.key_dim;
  for (int64_t m = 0; m < op.group(); ++m) {
    const int64_t j = op.value_head(kh, m);
    std::memcpy(to.recurrent + j * matrix, from.recurrent + j * matrix, at(matrix) * sizeof(float));
  }
}

RecurrentState snapshot(const DeltaNetOperands& op, int64_t slot) {
  return {op.snapshot_conv + slot * op.conv_state_floats(),
          op.snapshot_recurrent + slot * op.recurrent_floats()};
}

// One row of key head kh: conv + SiLU of its channels into `conv_out` ([q | k | v of each of its
// value heads]), q/k normalisation, then per value head the gates, the recurrent step and the
// gated norm into `out`.
void key_head_row(const DeltaNetOperands& op, int64_t kh, const RecurrentState& state,
                  const float* in, float* out, float* conv_out) {
  const int64_t dk = op.key_dim, dv = op.value_dim, history = op.conv_kernel - 1;
  float* conv_at = conv_out;
  for_each_channel_run(op, kh, [&](int64_t first, int64_t count) {
    kernels::causal_conv(state.conv + first * history, op.conv_weight + first * op.conv_kernel,
                         count, op.conv_kernel, in + first, 1, conv_at, op.conv_activation);
    conv_at += count;
  });
  kernels::delta_net_query_key(conv_out, conv_out + dk, dk);
  const float* z = in + op.z_offset();
  const float* b = in + op.b_offset();
  const float* a = in + op.a_offset();
  for (int64_t m = 0; m < op.group(); ++m) {
    const int64_t j = op.value_head(kh, m);
    float beta = 0, g = 0;
    kernels::delta_net_gates(op.decay_factor[at(j)], op.dt_bias[at(j)], b[j], a[j], beta, g);
    kernels::DeltaRuleRows rows{
        conv_out, conv_out + dk, conv_out + 2 * dk + m * dv, dk, dv, &beta, &g, 1};
    float* o = out + j * dv;
    kernels::gated_delta_recurrent(state.recurrent + j * dv * dk, dv, dk, rows, o, dv);
    kernels::gated_rms_norm(o, z + j * dv, op.norm, dv, op.norm_eps, o);
  }
}

// Every row of key head kh at once (prefill rows, one sequence): the conv over all rows into
// `scratch` ([rows][q | k | v of its value heads]), q/k normalisation, then per value head its
// gates per row, the chunked delta rule (the recurrence for one row) and the gated norms. The
// same functions in the same order per value as the reference prefill's, so the same bits.
void key_head_rows(const DeltaNetOperands& op, int64_t kh, const RecurrentState& state,
                   const float* in, float* out, int64_t rows, float* scratch) {
  const int64_t dk = op.key_dim, dv = op.value_dim, history = op.conv_kernel - 1;
  const int64_t width = 2 * dk + op.group() * dv;
  float* conv_out = scratch;
  float* beta = conv_out + rows * width;
  float* g = beta + rows;
  int64_t at_channel = 0;
  for_each_channel_run(op, kh, [&](int64_t first, int64_t count) {
    kernels::causal_conv_strided(state.conv + first * history,
                                 op.conv_weight + first * op.conv_kernel, count, op.conv_kernel,
                                 in + first, op.in_stride, rows, conv_out + at_channel, width,
                                 op.conv_activation);
    at_channel += count;
  });
  for (int64_t n = 0; n < rows; ++n)
    kernels::delta_net_query_key(conv_out + n * width, conv_out + n * width + dk, dk);
  for (int64_t m = 0; m < op.group(); ++m) {
    const int64_t j = op.value_head(kh, m);
    for (int64_t n = 0; n < rows; ++n) {
      const float* row = in + n * op.in_stride;
      kernels::delta_net_gates(op.decay_factor[at(j)], op.dt_bias[at(j)], row[op.b_offset() + j],
                               row[op.a_offset() + j], beta[n], g[n]);
    }
    const kernels::DeltaRuleRows head{
        conv_out, conv_out + dk, conv_out + 2 * dk + m * dv, width, width, beta, g, rows};
    float* o = out + j * dv;
    float* s = state.recurrent + j * dv * dk;
    if (rows > 1) {
      kernels::gated_delta_chunked(s, dv, dk, head, o, op.out_stride, op.chunk);
    } else {
      kernels::gated_delta_recurrent(s, dv, dk, head, o, op.out_stride);
    }
    for (int64_t n = 0; n < rows; ++n) {
      float* on = o + n * op.out_stride;
      kernels::gated_rms_norm(on, in + n * op.in_stride + op.z_offset() + j * dv, op.norm, dv,
                              op.norm_eps, on);
    }
  }
}

}  // namespace

void run_delta_net_key_head(const DeltaNetOperands& op, int64_t kh, const Program& program,
                            float* scratch) {
  if (op.chunk > 0) {
    key_head_rows(op, kh, program.row(0).state->recurrent_state(op.state_slot),
                  program.buffer(op.in), program.buffer(op.out), program.rows(), scratch);
    return;
  }
  const bool snapshots = op.snapshot_conv != nullptr;
  const float* in = program.buffer(op.in);
  float* out = program.buffer(op.out);
  for (int64_t n = 0; n < program.rows(); ++n) {
    const RecurrentState state = program.row(n).state->recurrent_state(op.state_slot);
    if (snapshots && n == 0) copy_head_state(op, kh, state, snapshot(op, 0));
    key_head_row(op, kh, state, in + n * op.in_stride, out + n * op.out_stride, scratch);
    if (snapshots) copy_head_state(op, kh, state, snapshot(op, n + 1));
  }
}

}  // namespace md::program
