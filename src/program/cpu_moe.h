// The CPU meaning of the mixture-of-experts opcodes (instruction.h: MoeRouteOperands,
// MoeExpertsOperands, MoeDownOperands, MoeMixOperands) on kernels:: primitives: route the step's
// rows, run each chosen expert once for all rows that chose it, and sum the experts and the shared
// expert into the residual stream in one fixed order (or, normalised each, in each row's router
// order: kMoeMix).
#pragma once

#include <cstdint>

#include "program/program.h"

namespace md::program {

// The one task of kMoeRoute. `scratch` holds op.scratch_floats().
void run_moe_route(const MoeRouteOperands& op, const Program& program, float* scratch);

// Task `task` of kMoeExperts. `scratch` holds op.scratch_floats().
void run_moe_experts_task(const MoeExpertsOperands& op, int64_t task, const Program& program,
                          float* scratch);

// Task `task` of kMoeDown. `scratch` holds op.scratch_floats().
void run_moe_down_task(const MoeDownOperands& op, int64_t task, const Program& program,
                       float* scratch);

// Task `row` of kMoeMix.
void run_moe_mix_row(const MoeMixOperands& op, int64_t row, const Program& program);

}  // namespace md::program
