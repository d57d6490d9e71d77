// The CPU meaning of every opcode (instruction.h): a switch onto kernels::. Executors call
// run_prologue once per worker and instruction, then run_task for each task the worker claims.
#pragma once

#include <cstddef>
#include <vector>

#include "program/program.h"

namespace md::program {

// The RowInput of a projection-like instruction, or null.
const RowInput* row_input(const Instruction& ins);
// How many tasks the operands describe (tiles, ...), or -1 where the opcode leaves it free.
int64_t operand_tasks(const Instruction& ins);
// Every buffer id the operands name (for validation).
std::vector<BufferId> buffers_read_or_written(const Instruction& ins);

// Normalises the step's input rows into context.normalised when the instruction has a norm
// prologue; nothing otherwise.
void run_prologue(const Instruction& ins, const Program& program, WorkerContext& context);
void run_task(const Instruction& ins, int64_t task, const Program& program, WorkerContext& context);

// Prefetches bytes [from, to) of the weights task `task` will stream.
void prefetch_task_weights(const Instruction& ins, int64_t task, std::size_t from, std::size_t to);

}  // namespace md::program
