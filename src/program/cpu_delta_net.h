// The CPU meaning of the delta_net opcode (instruction.h, DeltaNetOperands): one key head of a
// Gated DeltaNet layer over the step's rows, on kernels:: primitives.
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// Key head `kh` for every step row in order (verify rows chain through the one sequence's state
// and write its snapshots). `scratch` holds DeltaNetOperands::scratch_floats(rows).
void run_delta_net_key_head(const DeltaNetOperands& op, int64_t kh, const Program& program,
                            float* scratch);

}  // namespace md::program
