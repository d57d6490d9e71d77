#include "program/cpu_ring_append.h"

#include <algorithm>

#include "kernels/norms.h"

namespace md::program {

void append_ring_rows(const RingAppendOperands& op, int64_t g, int64_t first, int64_t rows,
                      float* keys, const float* values, const kernels::KvRing& ring,
                      float* angles) {
  const int64_t hd = op.head_dim, half = op.rope->rotary_dim() / 2;
  for (int64_t r = 0; r < rows; ++r) {
    float* key = keys + r * op.kv_stride + g * hd;
    const float* value = values + r * op.kv_stride + g * hd;
    op.rope->angles(first + r, angles, angles + half);
    kernels::rms_norm(key, op.k_norm, hd, op.norm_eps, kernels::NormWeight::kPlain, key);
    op.rope->apply(key, angles, angles + half);
    std::copy(key, key + hd, ring.key(g, first + r));
    std::copy(value, value + hd, ring.value(g, first + r));
  }
}

void run_ring_append_kv_head(const RingAppendOperands& op, int64_t g, const Program& program,
                             float* scratch) {
  const StepRow& start = program.row(0);
  append_ring_rows(op, g, start.position, program.count(op.rows_from), program.buffer(op.k),
                   program.buffer(op.v), start.state->kv_ring(op.layer), scratch);
}

}  // namespace md::program
