#include "program/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>

#include "base/error.h"
#include "program/cpu_executor.h"
#include "program/op_executor.h"
#include "program/program.h"

namespace md::program {
namespace {

Instruction family(std::string name, int64_t tasks,
                   std::function<void(int64_t, WorkerContext&)> body,
                   std::vector<Dependency> waits = {}) {
  Instruction ins;
  ins.name = std::move(name);
  ins.tasks = tasks;
  ins.operands = FamilyOperands{std::move(body), {}};
  ins.waits = std::move(waits);
  return ins;
}

// Yields until `done` holds; false after 20 s, so that a task blocked by a regression fails its
// test instead of hanging it.
bool wait_until(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

Dependency all_of(int32_t producer, int64_t tasks) {
  return {producer, 0, tasks};
}

// A three-instruction pipeline whose later stages read what other tasks (and so other workers)
// wrote: a missing or wrong dependency wait shows up as a wrong result.
struct Pipeline {
  static constexpr int64_t kN = 4096;
  std::vector<int64_t> a = std::vector<int64_t>(kN), b = std::vector<int64_t>(kN);
  int64_t sum = 0;
  int64_t step_input = 0;

  std::vector<Instruction> instructions() {
    std::vector<Instruction> list;
    list.push_back(family("fill", kN / 64, [this](int64_t t, WorkerContext&) {
      for (int64_t i = t * 64; i < (t + 1) * 64; ++i) a[i] = i * step_input;
    }));
    list.push_back(family("reverse", kN / 32,
                          [this](int64_t t, WorkerContext& c) {
                            c.scratch[0] = 1;  // scratch is private to the worker
                            for (int64_t i = t * 32; i < (t + 1) * 32; ++i)
                              b[i] = a[kN - 1 - i] + 1;
                          },
                          {all_of(0, kN / 64)}));
    list.push_back(family(
        "sum", 1,
        [this](int64_t, WorkerContext&) { sum = std::accumulate(b.begin(), b.end(), int64_t{0}); },
        {all_of(1, kN / 32)}));
    return list;
  }
  int64_t expected() const { return step_input * (kN * (kN - 1) / 2) + kN; }
};

TEST(CpuExecutor, RunsDependentStepsCorrectlyForAnyTeamSize) {
  for (int threads : {1, 2, 3, 4}) {
    Pipeline pipeline;
    Program program(pipeline.instructions(), {}, threads, 16);
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
  Program program(pipeline.instructions(), {}, 3, 16);
  OpExecutor executor(3);
  for (int64_t step = 1; step <= 50; ++step) {
    pipeline.step_input = step;
    executor.run(program);
    ASSERT_EQ(pipeline.sum, pipeline.expected());
  }
}

TEST(Executors, AreChosenInOnePlace) {
  Executors executors(2);
  EXPECT_EQ(executors.get(ExecutorKind::kMega).kind(), ExecutorKind::kMega);
  EXPECT_EQ(executors.get(ExecutorKind::kOps).kind(), ExecutorKind::kOps);
  EXPECT_EQ(&executors.get(ExecutorKind::kMega), &executors.get(ExecutorKind::kMega));
  EXPECT_EQ(executors.get(ExecutorKind::kOps).threads(), 2);
  EXPECT_THROW(make_executor(ExecutorKind::kReference, 1), Error);
}

// Both consumer tasks read only producer task 0. Producer task 1 does not finish until consumer
// task 0 has run, so a consumer that waited for the whole producer (a chain) would never start:
// the program must complete, on every team size that can run both at once, whichever worker is
// stuck in producer task 1 and wherever the others start claiming. The wait is bounded so that a
// regression fails instead of hanging.
TEST(CpuExecutor, ATaskWaitsOnlyForTheProducerTilesItReads) {
  for (int threads : {2, 3}) {
    std::atomic<bool> consumer_ran{false};
    std::atomic<bool> timed_out{false};
    std::vector<int64_t> produced(2), consumed(2);
    std::vector<Instruction> list;
    list.push_back(family("produce", 2, [&](int64_t t, WorkerContext&) {
      produced[static_cast<std::size_t>(t)] = 10 + t;
      if (t != 1) return;
      if (!wait_until([&] { return consumer_ran.load(); })) timed_out = true;
    }));
    Instruction consume = family("consume", 2, [&](int64_t t, WorkerContext&) {
      consumed[static_cast<std::size_t>(t)] = produced[0] * 2 + t;
      if (t == 0) consumer_ran = true;
    });
    consume.task_waits = {{{0, 0, 1}}, {{0, 0, 1}}};
    list.push_back(std::move(consume));
    Program program(std::move(list), {}, threads, 1);
    CpuExecutor executor(threads);
    executor.run(program);
    EXPECT_FALSE(timed_out) << threads << " threads: consumer task 0 waited for producer task 1";
    EXPECT_EQ(consumed, (std::vector<int64_t>{20, 21}));
  }
}

// A worker claims its own contiguous segment of an instruction's tasks first (so that the weight
// rows it streams continue from task to task), not the lowest unclaimed task. Task 0 does not
// finish until another worker has run a task, so whoever runs first besides it shows where it
// started: worker 1 of two starts at the middle, task 4 of 8 (a single counter would give it
// task 1). The worker that ran task 0 shows nothing: it may have been worker 1, after its own
// segment.
TEST(CpuExecutor, EachWorkerStartsOnItsOwnSegment) {
  constexpr int64_t kTasks = 8;
  std::vector<int64_t> first_task(2, -1);
  std::atomic<int64_t> ran_besides_zero{0};
  std::atomic<bool> timed_out{false};
  std::vector<Instruction> list;
  list.push_back(family("segments", kTasks, [&](int64_t t, WorkerContext& c) {
    auto w = static_cast<std::size_t>(c.worker);
    if (first_task[w] < 0) first_task[w] = t;
    if (t != 0) {
      ran_besides_zero.fetch_add(1);
      return;
    }
    if (!wait_until([&] { return ran_besides_zero.load() > 0; })) timed_out = true;
  }));
  Program program(std::move(list), {}, 2, 1);
  CpuExecutor executor(2);
  executor.run(program);
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(first_task[1], kTasks / 2);
}

// Tasks are claimed, not assigned: while one worker is stuck in a task the other takes the rest
// of the instruction, its segment included. Task 0 does not finish until every other task has
// (bounded: a static split, which leaves the stuck worker's segment to it, fails on the time-out
// instead of hanging).
TEST(CpuExecutor, AStalledWorkerLeavesItsShareToTheOthers) {
  constexpr int64_t kTasks = 64;
  std::vector<int> ran_by(kTasks, -1);
  std::atomic<int64_t> others_done{0};
  std::atomic<bool> timed_out{false};
  std::vector<Instruction> list;
  list.push_back(family("uneven", kTasks, [&](int64_t t, WorkerContext& c) {
    ran_by[static_cast<std::size_t>(t)] = c.worker;
    if (t != 0) {
      others_done.fetch_add(1);
      return;
    }
    if (!wait_until([&] { return others_done.load() >= kTasks - 1; })) timed_out = true;
  }));
  Program program(std::move(list), {}, 2, 1);
  CpuExecutor executor(2);
  executor.run(program);
  EXPECT_FALSE(timed_out) << "the stalled worker's share waited for it";
  EXPECT_EQ(std::count(ran_by.begin(), ran_by.end(), -1), 0);
}

// A scripted run queue: worker w waited half of each 10 ms step while contended[w] is set.
std::atomic<bool> scripted_contention[4];
std::atomic<int64_t> scripted_delay[4], scripted_wall[4];

ThreadClock scripted_clock(int worker) {
  auto w = static_cast<std::size_t>(worker);
  const int64_t wall = scripted_wall[w] += 10'000'000;
  const int64_t delay =
      scripted_contention[w] ? scripted_delay[w] += 5'000'000 : scripted_delay[w].load();
  return {delay, wall};
}

uint64_t tasks_of(const Program& program, int worker) {
  uint64_t tasks = 0;
  for (const auto& ins : program.profile()[static_cast<std::size_t>(worker)]) tasks += ins.tasks;
  return tasks;
}

TEST(CpuExecutor, AContendedWorkerSitsOutWhileAnotherIsCalm) {
  for (auto& flag : scripted_contention) flag = false;
  Pipeline pipeline;
  Program program(pipeline.instructions(), {}, 3, 16);
  CpuExecutor executor(3, scripted_clock);
  auto run_steps = [&](int steps) {
    program.reset_profile();
    program.set_profiling(true);
    for (int i = 0; i < steps; ++i) {
      pipeline.step_input += 1;
      executor.run(program);
      ASSERT_EQ(pipeline.sum, pipeline.expected()) << "step input " << pipeline.step_input;
    }
  };
  run_steps(20);
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(executor.took_part(w)) << w;

  // Worker 1 preempted: from the step after it noticed, it claims nothing.
  scripted_contention[1] = true;
  run_steps(SpinBudget::kPreemptedSteps + 1);
  run_steps(50);
  EXPECT_FALSE(executor.took_part(1));
  EXPECT_EQ(tasks_of(program, 1), 0u);
  EXPECT_GT(tasks_of(program, 0) + tasks_of(program, 2), 0u);

  // Every worker preempted: the first half of the team (workers 0 and 1 of 3) runs the steps.
  scripted_contention[0] = scripted_contention[2] = true;
  run_steps(SpinBudget::kPreemptedSteps + 1);
  run_steps(20);
  EXPECT_TRUE(executor.took_part(0));
  EXPECT_TRUE(executor.took_part(1));
  EXPECT_FALSE(executor.took_part(2));
  EXPECT_EQ(tasks_of(program, 2), 0u);

  // Contention gone: the whole team is back after kContendedSteps calm steps.
  for (auto& flag : scripted_contention) flag = false;
  run_steps(SpinBudget::kContendedSteps + 2);
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(executor.took_part(w)) << w;
}

TEST(Program, RefusesMalformedPrograms) {
  auto noop = [](int64_t, WorkerContext&) {};
  {
    std::vector<Instruction> list;
    list.push_back(family("a", 1, noop, {{1, 0, 1}}));
    list.push_back(family("b", 1, noop));
    EXPECT_THROW(Program(std::move(list), {}, 1, 1), Error) << "forward dependency";
  }
  {
    std::vector<Instruction> list;
    list.push_back(family("a", 2, noop));
    list.push_back(family("b", 1, noop, {{0, 1, 3}}));
    EXPECT_THROW(Program(std::move(list), {}, 1, 1), Error) << "tasks the producer lacks";
  }
  {
    std::vector<Instruction> list;
    list.push_back(family("a", 2, noop));
    Instruction b = family("b", 3, noop);
    b.task_waits = {{{0, 0, 1}}};
    list.push_back(std::move(b));
    EXPECT_THROW(Program(std::move(list), {}, 1, 1), Error) << "waits for 1 of 3 tasks";
  }
  {
    std::vector<Instruction> list;
    Instruction embed;
    embed.name = "embed";
    embed.tasks = 1;
    embed.operands = EmbedOperands{{}, 3};
    list.push_back(std::move(embed));
    EXPECT_THROW(Program(std::move(list), {nullptr}, 1, 1), Error) << "buffer #3 of 1";
  }
  {
    std::vector<Instruction> list;
    Instruction argmax;
    argmax.name = "argmax";
    argmax.tasks = 2;
    argmax.operands = ArgmaxOperands{};
    list.push_back(std::move(argmax));
    EXPECT_THROW(Program(std::move(list), {}, 1, 1), Error) << "operands for 1 task, 2 declared";
  }
  {
    // Operands that do not fit together: a KDA layer whose conv has no history (kernel 1), a
    // residual mix over more candidates than a task holds, latent attention without W_UK_hᵀ.
    const float one = 1;
    KdaOperands kda{.in = 0,
                    .out = 0,
                    .in_stride = 5 * 8 + 1,
                    .out_stride = 8,
                    .heads = 1,
                    .head_dim = 8,
                    .conv_kernel = 1,
                    .conv_weight = {&one, &one, &one},
                    .exp_a_log = &one,
                    .dt_bias = &one,
                    .norm = &one};
    ResidualMixOperands mix{.prefix = 0,
                            .sub = 0,
                            .blocks = 0,
                            .out = 0,
                            .width = 4,
                            .block_rows = 1,
                            .block_count = kMaxResidualCandidates,
                            .weight = &one};
    LatentAttentionOperands latent{.heads = 1, .latent_norm = &one};
    for (auto [operands, tasks, what] : {std::tuple{Operands{kda}, 1, "kda, conv kernel 1"},
                                         {Operands{mix}, 1, "residual_mix, 65 candidates"},
                                         {Operands{latent}, 1, "latent_attention, no W_UK"}}) {
      std::vector<Instruction> list;
      Instruction bad;
      bad.name = "bad";
      bad.tasks = tasks;
      bad.operands = operands;
      list.push_back(std::move(bad));
      EXPECT_THROW(Program(std::move(list), {nullptr}, 1, 1), Error) << what;
    }
    // The same KDA operands with a conv of two taps are accepted (the control).
    kda.conv_kernel = 2;
    std::vector<Instruction> list;
    Instruction good;
    good.name = "good";
    good.tasks = 1;
    good.operands = kda;
    list.push_back(std::move(good));
    EXPECT_NO_THROW(Program(std::move(list), {nullptr}, 1, 1));
  }
  {
    std::vector<Instruction> list;
    Instruction norm;
    norm.name = "norm_rows";
    norm.tasks = 2;
    norm.operands = NormRowsOperands{0, 4, NormKind::kNone, nullptr, 0.0f, Program::kCounts};
    list.push_back(std::move(norm));
    EXPECT_THROW(Program(std::move(list), {nullptr}, 1, 1), Error) << "no such count register";
  }
  {
    std::vector<Instruction> list;
    list.push_back(family("a", 1, noop));
    EXPECT_THROW(Program(std::move(list), {}, 1, 1, 0), Error) << "a program of no rows";
  }
}

// Operands that hold a bounded number of rows (attention's row blocks, the lm_head's per-tile
// maxima) must hold every row a run of the program may give them.
TEST(Program, RefusesOperandsThatHoldFewerRowsThanARun) {
  auto single = [](const char* name, int64_t tasks, Operands operands) {
    Instruction ins;
    ins.name = name;
    ins.tasks = tasks;
    ins.operands = std::move(operands);
    std::vector<Instruction> list;
    list.push_back(std::move(ins));
    return list;
  };
  auto attention = [&](int64_t row_block, int64_t row_blocks) {
    return single("attention", std::max<int64_t>(1, row_blocks),
                  AttentionOperands{.q = 0,
                                    .k = 0,
                                    .v = 0,
                                    .out = 0,
                                    .heads = 2,
                                    .kv_heads = 1,
                                    .head_dim = 4,
                                    .row_block = row_block,
                                    .row_blocks = row_blocks});
  };
  EXPECT_NO_THROW(Program(attention(8, 3), {nullptr}, 1, 1, 24));
  EXPECT_THROW(Program(attention(8, 3), {nullptr}, 1, 1, 25), Error) << "24 rows of 25";
  EXPECT_THROW(Program(attention(8, 0), {nullptr}, 1, 1, 8), Error) << "no row blocks";
  auto argmax = [&](int64_t capacity, int64_t first_row) {
    return single("argmax", 1,
                  ArgmaxOperands{.row_capacity = capacity, .first_row = first_row, .shard = {}});
  };
  EXPECT_NO_THROW(Program(argmax(1, -1), {}, 1, 1, 256)) << "the last row of 256";
  EXPECT_NO_THROW(Program(argmax(256, 0), {}, 1, 1, 256));
  EXPECT_THROW(Program(argmax(8, 0), {}, 1, 1, 256), Error) << "8 of 256 rows";
  EXPECT_THROW(Program(argmax(1, -2), {}, 1, 1, 256), Error) << "the last 2 rows in 1";
}

// A negative first row counts back from the input's row count.
TEST(Program, ANegativeFirstRowCountsFromTheEnd) {
  std::vector<Instruction> list;
  list.push_back(family("a", 1, [](int64_t, WorkerContext&) {}));
  Program program(std::move(list), {}, 1, 1, 12);
  program.set_rows(std::vector<StepRow>(5));
  RowInput input;
  input.first_row = -1;
  EXPECT_EQ(program.first_row(input), 4);
  EXPECT_EQ(program.input_rows(input), 1);
  input.first_row = -7;
  EXPECT_EQ(program.first_row(input), 0);
  EXPECT_EQ(program.input_rows(input), 5);
  EXPECT_EQ(resolved_first_row(-2, 9), 7);
  EXPECT_EQ(resolved_first_row(3, 9), 3);
}

// Step rows and count registers stay within the program's row bound; a bad value changes nothing.
TEST(Program, BoundsItsRowsAndCounts) {
  std::vector<Instruction> list;
  list.push_back(family("a", 1, [](int64_t, WorkerContext&) {}));
  Program program(std::move(list), {}, 1, 1, 12);
  EXPECT_EQ(program.max_rows(), 12);
  std::vector<StepRow> rows(12);
  program.set_rows(rows);
  EXPECT_EQ(program.rows(), 12);
  rows.resize(13);
  EXPECT_THROW(program.set_rows(rows), Error);
  EXPECT_EQ(program.rows(), 12);
  program.set_count(1, 12);
  EXPECT_EQ(program.count(1), 12);
  EXPECT_EQ(program.count(kStepRows), 12);
  EXPECT_THROW(program.set_count(1, 13), Error);
  EXPECT_THROW(program.set_count(0, -1), Error);
  EXPECT_THROW(program.set_count(Program::kCounts, 1), Error);
  EXPECT_EQ(program.count(1), 12);
  RowInput input;
  input.first_row = 1;
  input.rows_from = 1;
  EXPECT_EQ(program.input_rows(input), 11);
}

TEST(CpuExecutor, RefusesAProgramBuiltForAnotherTeam) {
  Pipeline pipeline;
  Program program(pipeline.instructions(), {}, 2, 16);
  CpuExecutor executor(3);
  EXPECT_THROW(executor.run(program), Error);
  OpExecutor ops(3);
  EXPECT_THROW(ops.run(program), Error);
}

TEST(Program, ProfileCountsEveryTaskOfEveryStep) {
  Pipeline pipeline;
  Program program(pipeline.instructions(), {}, 2, 16);
  program.set_profiling(true);
  CpuExecutor executor(2);
  for (int step = 0; step < 5; ++step) executor.run(program);
  EXPECT_EQ(program.profiled_steps(), 5u);
  for (std::size_t i = 0; i < program.instructions().size(); ++i) {
    uint64_t tasks = 0;
    for (const auto& worker : program.profile()) tasks += worker[i].tasks;
    EXPECT_EQ(tasks, 5u * static_cast<uint64_t>(program.instructions()[i].tasks)) << i;
  }
  program.reset_profile();
  EXPECT_EQ(program.profile()[0][0].tasks, 0u);
}

TEST(Program, DescribesOpcodesTasksAndDependencies) {
  Pipeline pipeline;
  std::vector<Instruction> list = pipeline.instructions();
  list[2].task_waits = {{{1, 3, 7}}};
  Program program(std::move(list), {}, 1, 16);
  std::string text = program.describe();
  EXPECT_NE(text.find("3 instructions, 1 workers"), std::string::npos) << text;
  EXPECT_NE(text.find("family_kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("#0 (all)"), std::string::npos) << text;
  EXPECT_NE(text.find("#1 per task (at most 4 tiles)"), std::string::npos) << text;
}

}  // namespace
}  // namespace md::program
