#include <gtest/gtest.h>

#include <numeric>

#include "base/error.h"
#include "program/cpu_executor.h"
#include "program/op_executor.h"
#include "program/program.h"

namespace md::program {
namespace {

// A three-instruction pipeline whose later stages read what other tasks (and so other workers)
// wrote: a missing or wrong dependency wait shows up as a wrong result.
struct Pipeline {
  static constexpr int64_t kN = 4096;
  std::vector<int64_t> a = std::vector<int64_t>(kN), b = std::vector<int64_t>(kN);
  int64_t sum = 0;
  int64_t step_input = 0;

  std::vector<Instruction> instructions() {
    std::vector<Instruction> list;
    list.push_back({"fill", kN / 64, 64, {}, [this](int64_t begin, int64_t end, WorkerContext&) {
                      for (int64_t t = begin * 64; t < end * 64; ++t) a[t] = t * step_input;
                    }});
    list.push_back({"reverse", kN / 32, 32, {0}, [this](int64_t begin, int64_t end, WorkerContext& c) {
                      c.scratch[0] = 1;  // scratch is private to the worker
                      for (int64_t t = begin * 32; t < end * 32; ++t) b[t] = a[kN - 1 - t] + 1;
                    }});
    list.push_back({"sum", 1, kN, {1}, [this](int64_t, int64_t, WorkerContext&) {
                      sum = std::accumulate(b.begin(), b.end(), int64_t{0});
                    }});
    return list;
  }
  int64_t expected() const { return step_input * (kN * (kN - 1) / 2) + kN; }
};

TEST(CpuExecutor, RunsDependentStepsCorrectlyForAnyTeamSize) {
  for (int threads : {1, 2, 3, 4}) {
    Pipeline pipeline;
    Program program(pipeline.instructions(), threads, 16);
    CpuExecutor executor(threads);
    for (int64_t step = 1; step <= 300; ++step) {
      pipeline.step_input = step;
      executor.run(program);
      ASSERT_EQ(pipeline.sum, pipeline.expected()) << threads << " threads, step " << step;
    }
  }
}

TEST(OpExecutor, RunsTheSameProgram) {
  Pipeline pipeline;
  Program program(pipeline.instructions(), 3, 16);
  OpExecutor executor(3);
  for (int64_t step = 1; step <= 50; ++step) {
    pipeline.step_input = step;
    executor.run(program);
    ASSERT_EQ(pipeline.sum, pipeline.expected());
  }
}

TEST(Program, BalancesUnevenInstructionsAcrossWorkers) {
  std::vector<Instruction> list;
  auto noop = [](int64_t, int64_t, WorkerContext&) {};
  for (int i = 0; i < 6; ++i) list.push_back({"one", 1, 10, {}, noop});  // single-task ops
  Program program(std::move(list), 3, 1);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(program.schedule(w).size(), 2u) << "worker " << w;
}

TEST(Program, RefusesForwardDependencies) {
  std::vector<Instruction> list;
  auto noop = [](int64_t, int64_t, WorkerContext&) {};
  list.push_back({"a", 1, 1, {1}, noop});
  list.push_back({"b", 1, 1, {}, noop});
  EXPECT_THROW(Program(std::move(list), 1, 1), Error);
}

TEST(CpuExecutor, RefusesAProgramBuiltForAnotherTeam) {
  Pipeline pipeline;
  Program program(pipeline.instructions(), 2, 16);
  CpuExecutor executor(3);
  EXPECT_THROW(executor.run(program), Error);
}

}  // namespace
}  // namespace md::program
