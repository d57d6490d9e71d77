// `megadecode bench --profile`: a step program's per-instruction time, bytes and waits as a
// table, instructions of the same kind in every layer ("L3.attention", "L4.attention", …) on
// one line, against the time the step's weight bytes need at the measured read bandwidth.
#pragma once

#include <string>

#include "program/program.h"

namespace md::cli {

// `bandwidth`: the machine's read bandwidth in bytes/s measured in the same run; `step_seconds`:
// the mean step time measured with profiling off.
std::string format_profile(const program::Program& program, double bandwidth, double step_seconds);

// Which weight formats the program's tiles stream ("Q4_1, Q6_K", "bf16").
std::string weight_formats(const program::Program& program);

}  // namespace md::cli
