// The CPU meaning of every opcode (instruction.h): a switch onto kernels::. Executors call
// run_prologue once per worker and instruction, then run_task for each task the worker claims.
#pragma once

#include <cstddef>

#include "program/program.h"

namespace md::program {

// Normalises the step's input rows into context.normalised when the instruction has a norm
// prologue, or runs a family kernel's own prologue; nothing otherwise.
void run_prologue(const Instruction& ins, const Program& program, WorkerContext& context);
void run_task(const Instruction& ins, int64_t task, const Program& program, WorkerContext& context);

// Prefetches bytes [from, to) of the weights task `task` will stream.
void prefetch_task_weights(const Instruction& ins, int64_t task, std::size_t from, std::size_t to);

}  // namespace md::program
