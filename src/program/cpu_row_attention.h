// The CPU meaning of the row_attention opcode (instruction.h, RowAttentionOperands): one KV head
// of attention over position-indexed keys and values (a full layer's, or a sliding window's ring)
// with weightless QK and output norms and a sigmoid output gate.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// KV head `g` for every step row in order: its key and its group's queries normalised (and
// rotated), the key and value stored, then every query head of the group attends, is normalised
// and gated.
void run_row_attention_kv_head(const RowAttentionOperands& op, int64_t g, const Program& program);

}  // namespace md::program
