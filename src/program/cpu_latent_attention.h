// The CPU meaning of the latent_append and latent_attention opcodes (instruction.h,
// LatentAttentionOperands): MLA without RoPE over its compressed cache, as the reference forward
// (models/kimi/kimi_reference.cpp) computes it, so that both give the same bits.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// Task `row` of kLatentAppend: the row's cache entry written at its position.
void run_latent_append_row(const LatentAttentionOperands& op, int64_t row, const Program& program);

// Task `head` of kLatentAttention over every step row. `scratch` holds op.scratch_floats().
void run_latent_attention_head(const LatentAttentionOperands& op, int64_t head,
                               const Program& program, float* scratch);

}  // namespace md::program
