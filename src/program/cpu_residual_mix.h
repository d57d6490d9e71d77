// The CPU meaning of the residual_mix opcode (instruction.h, ResidualMixOperands): one step row
// of Kimi K3's attention residuals — the prefix update, the tap, the mix and the block push — on
// kernels/residual_mix.h.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// Task `row` of kResidualMix. `scratch` holds op.scratch_floats().
void run_residual_mix_row(const ResidualMixOperands& op, int64_t row, const Program& program,
                          float* scratch);

}  // namespace md::program
