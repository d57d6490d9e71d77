#include "program/op_executor.h"

#include "base/error.h"

namespace md::program {

void OpExecutor::run(Program& program) {
  if (program.workers() != threads()) {
    fail("program built for {} workers run on an executor of {}", program.workers(), threads());
  }
  uint64_t step = program.begin_step();
  const auto count = static_cast<int32_t>(program.instructions().size());
  for (int32_t i = 0; i < count; ++i) {
    // Every worker claims tasks of this instruction until none is left; then the barrier.
    pool_.parallel_for(program.workers(), [&](int64_t first, int64_t last) {
      for (int64_t w = first; w < last; ++w) program.run_instruction(static_cast<int>(w), i, step);
    });
  }
  program.throw_if_failed();
}

}  // namespace md::program
