#include "program/op_executor.h"

#include "base/error.h"

namespace md::program {

void OpExecutor::run(Program& program) {
  if (program.workers() != threads()) {
    fail("program built for {} workers run on an executor of {}", program.workers(), threads());
  }
  uint64_t step = ++program.steps_run;
  const auto& instructions = program.instructions();
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const Instruction& ins = instructions[i];
    auto index = static_cast<int32_t>(i);
    // Worker w runs the same task range it owns in the fused schedule.
    pool_.parallel_for(program.workers(), [&](int64_t first, int64_t last) {
      for (int64_t w = first; w < last; ++w) {
        for (const Assignment& a : program.schedule(static_cast<int>(w))) {
          if (a.instruction != index) continue;
          ins.body(a.begin, a.end, program.context(static_cast<int>(w)));
          program.mark_done(index, a.end - a.begin);
        }
      }
    });
    (void)step;
  }
}

}  // namespace md::program
