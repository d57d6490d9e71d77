#include "program/cpu_kda.h"

#include <algorithm>
#include <cmath>

#include "kernels/activations.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/kda_rule.h"
#include "kernels/norms.h"

namespace md::program {

namespace {

// The short conv (SiLU) of channels [first, first + d) of one of q, k, v for the current token
// `now`, then the history shifted by one token: history [K − 1][C], oldest first; taps [C][K],
// tap K − 1 multiplying the current token.
void short_conv(float* history, const float* taps, const float* now, int64_t channels,
                int64_t kernel, int64_t first, int64_t d, float* out) {
  for (int64_t c = first; c < first + d; ++c) {
    const float* tap = taps + c * kernel;
    float y = 0;
    for (int64_t k = 0; k < kernel - 1; ++k) y += tap[k] * history[k * channels + c];
    y += tap[kernel - 1] * now[c];
    out[c - first] = kernels::silu(y);
  }
  for (int64_t k = 0; k + 1 < kernel - 1; ++k) {
    std::copy(history + (k + 1) * channels + first, history + (k + 1) * channels + first + d,
              history + k * channels + first);
  }
  std::copy(now + first, now + first + d, history + (kernel - 2) * channels + first);
}

// The head's part of the state (its channels of the three histories, its d × d matrix) copied
// from `from` to `to`.
void copy_head_state(const KdaOperands& op, int64_t head, const RecurrentState& from,
                     const RecurrentState& to) {
  const int64_t d = op.head_dim, channels = op.channels();
  for (int64_t k = 0; k < 3 * (op.conv_kernel - 1); ++k) {
    const float* src = from.conv + k * channels + head * d;
    std::copy(src, src + d, to.conv + k * channels + head * d);
  }
  const float* s = from.recurrent + head * d * d;
  std::copy(s, s + d * d, to.recurrent + head * d * d);
}

// Every row of `head` at once (prefill rows of one sequence): per row the short convs, the q/k
// norms and the log-decays into `scratch` ([rows][q | k | v | g], then β per row), the chunked
// delta rule over all rows, then the gated norms: the reference prefill's functions in its order.
void kda_head_rows(const KdaOperands& op, int64_t head, const Program& program, float* scratch) {
  const int64_t d = op.head_dim, channels = op.channels(), kernel = op.conv_kernel;
  const int64_t first = head * d, rows = program.rows(), width = 4 * d;
  const RecurrentState state = program.row(0).state->recurrent_state(op.state_slot);
  float* beta = scratch + rows * width;
  const auto q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t n = 0; n < rows; ++n) {
    const float* in = program.buffer(op.in) + n * op.in_stride;
    float* row = scratch + n * width;
    for (int i = 0; i < 3; ++i) {
      short_conv(state.conv + i * (kernel - 1) * channels, op.conv_weight[i], in + i * channels,
                 channels, kernel, first, d, row + i * d);
    }
    kernels::l2_normalize(row, d, kernels::kDeltaNetL2Eps, q_scale);
    kernels::l2_normalize(row + d, d, kernels::kDeltaNetL2Eps, 1.0f);
    const float* f = in + op.f_offset();
    for (int64_t c = first; c < first + d; ++c) {
      row[3 * d + c - first] =
          kernels::kda_lower_bound_gate(op.exp_a_log[head], f[c], op.dt_bias[c], op.lower_bound);
    }
    beta[n] = kernels::sigmoid(in[op.b_offset() + head]);
  }
  kernels::KdaRows all;
  all.q = scratch, all.k = scratch + d, all.v = scratch + 2 * d;
  all.qk_stride = width, all.v_stride = width;
  all.beta = beta, all.g = scratch + 3 * d, all.g_stride = width, all.rows = rows;
  float* y = program.buffer(op.out) + first;
  kernels::kda_chunked(state.recurrent + head * d * d, d, d, all, y, op.out_stride, op.chunk);
  for (int64_t n = 0; n < rows; ++n) {
    const float* in = program.buffer(op.in) + n * op.in_stride;
    float* yn = y + n * op.out_stride;
    kernels::gated_rms_norm(yn, in + op.gate_offset() + first, op.norm, d, op.norm_eps, yn,
                            kernels::Activation::kSigmoid);
  }
}

}  // namespace

void run_kda_head(const KdaOperands& op, int64_t head, const Program& program, float* scratch) {
  if (op.chunk > 0) {
    kda_head_rows(op, head, program, scratch);
    return;
  }
  const int64_t d = op.head_dim, channels = op.channels(), kernel = op.conv_kernel;
  const int64_t first = head * d;
  float* q = scratch;
  float* k = scratch + d;
  float* v = scratch + 2 * d;
  float* g = scratch + 3 * d;
  const auto q_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t n = 0; n < program.rows(); ++n) {
    const StepRow& row = program.row(n);
    const RecurrentState state = row.state->recurrent_state(op.state_slot);
    const float* in = program.buffer(op.in) + n * op.in_stride;
    float* conv_out[3] = {q, k, v};
    for (int i = 0; i < 3; ++i) {
      short_conv(state.conv + i * (kernel - 1) * channels, op.conv_weight[i], in + i * channels,
                 channels, kernel, first, d, conv_out[i]);
    }
    kernels::l2_normalize(q, d, kernels::kDeltaNetL2Eps, q_scale);
    kernels::l2_normalize(k, d, kernels::kDeltaNetL2Eps, 1.0f);
    const float* f = in + op.f_offset();
    for (int64_t c = first; c < first + d; ++c) {
      g[c - first] =
          kernels::kda_lower_bound_gate(op.exp_a_log[head], f[c], op.dt_bias[c], op.lower_bound);
    }
    const float beta = kernels::sigmoid(in[op.b_offset() + head]);
    kernels::KdaRows rows;
    rows.q = q, rows.k = k, rows.v = v, rows.qk_stride = d, rows.v_stride = d;
    rows.beta = &beta, rows.g = g, rows.g_stride = d, rows.rows = 1;
    float* y = program.buffer(op.out) + n * op.out_stride + first;
    kernels::kda_recurrent(state.recurrent + head * d * d, d, d, rows, y, channels);
    kernels::gated_rms_norm(y, in + op.gate_offset() + first, op.norm, d, op.norm_eps, y,
                            kernels::Activation::kSigmoid);
    if (op.snapshots && n + 1 < program.rows()) {
      copy_head_state(op, head, state, row.state->recurrent_snapshot(op.state_slot, n + 1));
    }
  }
}

}  // namespace md::program
