// The CPU meaning of the window_attention opcode (instruction.h, WindowAttentionOperands): one KV
// head of a draft block's bidirectional sliding-window attention over a context ring.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// KV head `g`: the new context rows' keys into the ring, the block's keys and queries normalised
// and rotated, then every query head of the group attends for every block row. `scratch` holds
// head_dim + window + step rows floats.
void run_window_attention_kv_head(const WindowAttentionOperands& op, int64_t g,
                                  const Program& program, float* scratch);

}  // namespace md::program
