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

// The conv channels a key head reads, as [first channel, count]: its q, its k, its value heads' v.
struct HeadChannels {
  int64_t first[3];
  int64_t count[3];
};

HeadChannels channels_of(const DeltaNetOperands& op, int64_t kh) {
  const int64_t dk = op.key_dim, dv = op.value_dim, key_width = op.key_heads * dk;
  const int64_t j0 = kh * op.group();
  return {{kh * dk, key_width + kh * dk, 2 * key_width + j0 * dv}, {dk, dk, op.group() * dv}};
}

// Copies the part of a state that key head kh owns (its conv channels, its value heads'
// matrices): heads never share state, so snapshots and live state are written head by head.
void copy_head_state(const DeltaNetOperands& op, int64_t kh, const RecurrentState& from,
                     const RecurrentState& to) {
  const int64_t history = op.conv_kernel - 1;
  const HeadChannels ch = channels_of(op, kh);
  for (int i = 0; i < 3; ++i) {
    std::memcpy(to.conv + ch.first[i] * history, from.conv + ch.first[i] * history,
                at(ch.count[i] * history) * sizeof(float));
  }
  const int64_t matrix = op.value_dim * op.key_dim, j0 = kh * op.group();
  std::memcpy(to.recurrent + j0 * matrix, from.recurrent + j0 * matrix,
              at(op.group() * matrix) * sizeof(float));
}

RecurrentState snapshot(const DeltaNetOperands& op, int64_t slot) {
  return {op.snapshot_conv + slot * op.conv_state_floats(),
          op.snapshot_recurrent + slot * op.recurrent_floats()};
}

// One row of key head kh: conv + SiLU of its channels into `conv_out` ([q | k | v of the
// group]), q/k normalisation, then per value head the gates, the recurrent step and the gated
// norm into `out`.
void key_head_row(const DeltaNetOperands& op, int64_t kh, const RecurrentState& state,
                  const float* in, float* out, float* conv_out) {
  const int64_t dk = op.key_dim, dv = op.value_dim, history = op.conv_kernel - 1;
  const HeadChannels ch = channels_of(op, kh);
  const int64_t out_at[3] = {0, dk, 2 * dk};
  for (int i = 0; i < 3; ++i) {
    kernels::causal_conv_silu(state.conv + ch.first[i] * history,
                              op.conv_weight + ch.first[i] * op.conv_kernel, ch.count[i],
                              op.conv_kernel, in + ch.first[i], 1, conv_out + out_at[i]);
  }
  kernels::delta_net_query_key(conv_out, conv_out + dk, dk);
  const float* z = in + op.z_offset();
  const float* b = in + op.b_offset();
  const float* a = in + op.a_offset();
  const int64_t j0 = kh * op.group();
  for (int64_t j = j0; j < j0 + op.group(); ++j) {
    float beta = 0, g = 0;
    kernels::delta_net_gates(op.decay_factor[at(j)], op.dt_bias[at(j)], b[j], a[j], beta, g);
    kernels::DeltaRuleRows rows{
        conv_out, conv_out + dk, conv_out + 2 * dk + (j - j0) * dv, dk, dv, &beta, &g, 1};
    float* o = out + j * dv;
    kernels::gated_delta_recurrent(state.recurrent + j * dv * dk, dv, dk, rows, o, dv);
    kernels::gated_rms_norm(o, z + j * dv, op.norm, dv, op.norm_eps, o);
  }
}

}  // namespace

void run_delta_net_key_head(const DeltaNetOperands& op, int64_t kh, const Program& program,
                            float* scratch) {
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
