// The CPU meaning of the ring_append opcode (instruction.h, RingAppendOperands): one KV head of a
// run of context rows into a draft context's sliding-window ring. kWindowAttention stores a
// round's new context rows with the same function, so both paths give the ring the same bits.
#pragma once

#include <cstdint>

#include "kernels/kv_ring.h"
#include "program/program.h"

namespace md::program {

// Rows r < `rows` of KV head `g`: the key at keys[r·kv_stride + g·head_dim] is normalised and
// rotated in place at position first + r, then written with its value into `ring`. `angles`
// holds rotary_dim floats.
void append_ring_rows(const RingAppendOperands& op, int64_t g, int64_t first, int64_t rows,
                      float* keys, const float* values, const kernels::KvRing& ring, float* angles);

// Task `g` of a ring_append: the rows `rows_from` counts, from step row 0's position, into the
// ring of step row 0's sequence. `scratch` holds rotary_dim floats.
void run_ring_append_kv_head(const RingAppendOperands& op, int64_t g, const Program& program,
                             float* scratch);

}  // namespace md::program
