// The CPU meaning of the kda opcode (instruction.h, KdaOperands): one head of a Kimi Delta
// Attention layer over the step's rows, on kernels:: primitives, in the order of the reference
// forward (models/kimi/kimi_reference.cpp), so that both compute the same bits.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// Head `head` for every step row in order (verify rows chain through the one sequence's state
// and write its snapshots). `scratch` holds KdaOperands::scratch_floats().
void run_kda_head(const KdaOperands& op, int64_t head, const Program& program, float* scratch);

}  // namespace md::program
