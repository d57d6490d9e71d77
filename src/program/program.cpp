#include "program/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "base/error.h"
#include "program/cpu_interpreter.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace md::program {

RecurrentState StepState::recurrent_state(int64_t slot) {
  fail("this sequence has no recurrent state (delta-rule layer slot {})", slot);
}

kernels::KvRing StepState::kv_ring(int64_t layer) {
  fail("this sequence has no sliding-window ring (layer {})", layer);
}

kernels::KvRows& StepState::kv_rows(int64_t layer) {
  fail("this sequence keeps no position-indexed keys and values (layer {})", layer);
}

RecurrentState StepState::recurrent_snapshot(int64_t slot, int64_t rows) {
  fail("this sequence keeps no verify snapshots (recurrent slot {}, {} rows)", slot, rows);
}

LatentRows StepState::latent_rows(int64_t slot) {
  fail("this sequence keeps no latent cache (MLA slot {})", slot);
}

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

float* allocate_scratch(std::size_t floats) {
  std::size_t bytes = std::max<std::size_t>(64, (floats * sizeof(float) + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void free_scratch(float* p) {
  std::free(p);
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Floats of normalised input rows a worker needs: the widest normalised RowInput times the rows.
std::size_t normalised_floats(const std::vector<Instruction>& instructions, int64_t max_rows) {
  int64_t widest = 0;
  for (const Instruction& ins : instructions) {
    if (const RowInput* input = row_input(ins);
        input != nullptr && input->norm != NormKind::kNone) {
      widest = std::max(widest, input->stride);
    }
  }
  return static_cast<std::size_t>(widest * max_rows);
}

// While a task waits, its worker asks for this many more weight bytes per spin round.
constexpr std::size_t kPrefetchBytesPerRound = 256;

}  // namespace

Program::Program(std::vector<Instruction> instructions, std::vector<float*> buffers, int workers,
                 std::size_t scratch_floats, int64_t max_rows)
    : instructions_(std::move(instructions)),
      buffers_(std::move(buffers)),
      workers_(std::max(1, workers)),
      max_rows_(max_rows),
      step_rows_(static_cast<std::size_t>(std::max<int64_t>(1, max_rows))) {
  if (max_rows < 1) fail("a program takes at least one row, not {}", max_rows);
  validate();
  std::size_t count = instructions_.size();
  std::size_t total_tasks = 0;
  for (const Instruction& ins : instructions_) {
    first_task_.push_back(total_tasks);
    total_tasks += static_cast<std::size_t>(ins.tasks);
  }
  stamps_ = std::make_unique<std::atomic<uint64_t>[]>(std::max<std::size_t>(1, total_tasks));
  for (std::size_t t = 0; t < total_tasks; ++t) stamps_[t].store(0, std::memory_order_relaxed);
  done_ = std::make_unique<Counter[]>(count);
  claims_ = std::make_unique<Counter[]>(claim_counters());
  std::size_t normalised = normalised_floats(instructions_, max_rows_);
  for (int w = 0; w < workers_; ++w) {
    scratch_.emplace_back(allocate_scratch(normalised + scratch_floats), free_scratch);
    float* base = scratch_.back().get();
    contexts_.push_back({w, base, base + normalised});
  }
  profile_.assign(static_cast<std::size_t>(workers_), std::vector<InstructionProfile>(count));
}

Program::~Program() = default;

namespace {

// The most rows an instruction's operands hold (attention's row blocks, the lm_head's per-tile
// maxima, a MoE plan's rows and entries), and the most a run of a program of `max_rows` can give
// them; other opcodes take any.
struct RowFit {
  int64_t held = 0, needed = 0;
};

RowFit row_fit(const Instruction& ins, int64_t max_rows) {
  // A negative first row reads the last rows only.
  auto needed = [&](int64_t first_row) { return first_row < 0 ? -first_row : max_rows; };
  switch (ins.opcode()) {
    case Opcode::kAttention: {
      const auto& op = std::get<AttentionOperands>(ins.operands);
      if (op.row_block == 0) return {};
      return {op.row_block * op.row_blocks, max_rows};
    }
    case Opcode::kLmHeadArgmax: {
      const auto& op = std::get<LmHeadOperands>(ins.operands);
      return {op.row_capacity, needed(op.input.first_row)};
    }
    case Opcode::kArgmax: {
      const auto& op = std::get<ArgmaxOperands>(ins.operands);
      return {op.row_capacity, needed(op.first_row)};
    }
    case Opcode::kMoeRoute: {
      const auto& op = std::get<MoeRouteOperands>(ins.operands);
      if (op.plan == nullptr || op.experts_per_token < 1) return {0, 1};
      return {std::min(op.plan->max_rows, op.plan->max_entries() / op.experts_per_token), max_rows};
    }
    default:
      return {};
  }
}

}  // namespace

void Program::validate() const {
  auto buffer_ok = [&](BufferId id) {
    return id == kNoBuffer || (id >= 0 && static_cast<std::size_t>(id) < buffers_.size());
  };
  for (std::size_t i = 0; i < instructions_.size(); ++i) {
    const Instruction& ins = instructions_[i];
    if (ins.tasks < 1) fail("program instruction '{}' has no tasks", ins.name);
    if (!ins.task_waits.empty() && static_cast<int64_t>(ins.task_waits.size()) != ins.tasks) {
      fail("program instruction '{}' lists waits for {} of its {} tasks", ins.name,
           ins.task_waits.size(), ins.tasks);
    }
    auto check = [&](const Dependency& d) {
      if (d.producer < 0 || static_cast<std::size_t>(d.producer) >= i) {
        fail("program instruction '{}' depends on #{}, which does not come before it", ins.name,
             d.producer);
      }
      const Instruction& producer = instructions_[static_cast<std::size_t>(d.producer)];
      if (d.begin < 0 || d.end > producer.tasks || d.begin >= d.end) {
        fail("program instruction '{}' waits for tasks [{}, {}) of '{}', which has {}", ins.name,
             d.begin, d.end, producer.name, producer.tasks);
      }
    };
    for (const Dependency& d : ins.waits) check(d);
    for (const auto& list : ins.task_waits) {
      for (const Dependency& d : list) check(d);
    }
    const int64_t expected = operand_tasks(ins);
    if (expected == -2) {
      fail("program instruction '{}' ({}) has operands that do not fit together", ins.name,
           opcode_name(ins.opcode()));
    }
    if (expected >= 0 && expected != ins.tasks) {
      fail("program instruction '{}' has {} tasks but operands for {}", ins.name, ins.tasks,
           expected);
    }
    for (BufferId id : buffers_named(ins)) {
      if (!buffer_ok(id))
        fail("program instruction '{}' names buffer #{}, which does not exist", ins.name, id);
    }
    for (RowCount from : counts_named(ins)) {
      if (from < kStepRows || from >= kCounts)
        fail("program instruction '{}' reads count register {}, which does not exist", ins.name,
             from);
    }
    if (const RowFit fit = row_fit(ins, max_rows_); fit.held < fit.needed) {
      fail("program instruction '{}' holds {} rows but a run may give it {}", ins.name, fit.held,
           fit.needed);
    }
  }
}

void Program::rebind(BufferId id, float* data) {
  if (id < 0 || static_cast<std::size_t>(id) >= buffers_.size()) fail("no program buffer #{}", id);
  buffers_[static_cast<std::size_t>(id)] = data;
}

void Program::set_rows(std::span<const StepRow> rows) {
  if (rows.empty() || static_cast<int64_t>(rows.size()) > max_rows_) {
    fail("a step takes 1..{} rows, not {}", max_rows_, rows.size());
  }
  std::copy(rows.begin(), rows.end(), step_rows_.begin());
  rows_ = static_cast<int64_t>(rows.size());
}

void Program::set_count(int i, int64_t rows) {
  if (i < 0 || i >= kCounts) fail("no count register {}", i);
  if (rows < 0 || rows > max_rows_)
    fail("count register {}: {} rows is outside 0..{}", i, rows, max_rows_);
  counts_[static_cast<std::size_t>(i)] = rows;
}

void Program::record_failure(const char* why) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (!failed_.load(std::memory_order_relaxed)) failure_ = why;
  failed_.store(true, std::memory_order_release);
}

void Program::throw_if_failed() {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    why.swap(failure_);
    failed_.store(false, std::memory_order_relaxed);
  }
  throw Error(why);
}

uint64_t Program::begin_step() {
  // The workers of the previous step have all returned, so nobody is claiming; the executor's
  // release of the step publishes these stores.
  for (std::size_t i = 0; i < claim_counters(); ++i) {
    claims_[i].value.store(0, std::memory_order_relaxed);
  }
  if (profiling_) ++profiled_steps_;
  return ++steps_run_;
}

bool Program::satisfied(const Dependency& d, uint64_t step) const {
  const Instruction& producer = instructions_[static_cast<std::size_t>(d.producer)];
  if (d.begin == 0 && d.end == producer.tasks) {
    return done_[static_cast<std::size_t>(d.producer)].value.load(std::memory_order_acquire) >=
           step * static_cast<uint64_t>(producer.tasks);
  }
  std::size_t first = first_task_[static_cast<std::size_t>(d.producer)];
  for (int64_t t = d.begin; t < d.end; ++t) {
    if (stamps_[first + static_cast<std::size_t>(t)].load(std::memory_order_acquire) < step)
      return false;
  }
  return true;
}

void Program::wait_for(const Instruction& ins, int64_t task, uint64_t step, int spin_rounds) {
  // Only a task that has to wait prefetches its weights: a ready one streams them right away.
  std::size_t prefetched = 0;
  std::size_t prefetch_total = 0;
  bool waited = false;
  auto wait_one = [&](const Dependency& d) {
    if (satisfied(d, step)) return;
    if (!waited) {
      prefetch_total = task_weight_bytes(ins, task);
      waited = true;
    }
    for (int spin = 0; spin < spin_rounds; ++spin) {
      if (prefetched < prefetch_total) {
        prefetch_task_weights(ins, task, prefetched, prefetched + kPrefetchBytesPerRound);
        prefetched += kPrefetchBytesPerRound;
      } else {
        cpu_relax();
      }
      if (satisfied(d, step)) return;
    }
    // Sleep on the producer's completion counter; every completed task bumps and notifies it.
    auto& counter = done_[static_cast<std::size_t>(d.producer)].value;
    for (uint64_t seen = counter.load(std::memory_order_acquire); !satisfied(d, step);
         seen = counter.load(std::memory_order_acquire)) {
      counter.wait(seen, std::memory_order_acquire);
    }
  };
  for (const Dependency& d : ins.waits) wait_one(d);
  if (!ins.task_waits.empty()) {
    for (const Dependency& d : ins.task_waits[static_cast<std::size_t>(task)]) wait_one(d);
  }
}

void Program::complete(int32_t index, int64_t task, uint64_t step) {
  auto i = static_cast<std::size_t>(index);
  stamps_[first_task_[i] + static_cast<std::size_t>(task)].store(step, std::memory_order_release);
  auto& counter = done_[i].value;
  counter.fetch_add(1, std::memory_order_release);
  counter.notify_all();  // cheap unless a worker went to sleep on it
}

void Program::run_instruction(int worker, int32_t index, uint64_t step) {
  const Instruction& ins = instructions_[static_cast<std::size_t>(index)];
  WorkerContext& context = contexts_[static_cast<std::size_t>(worker)];
  bool prologue_done = false;
  InstructionProfile* stats =
      profiling_ ? &profile_[static_cast<std::size_t>(worker)][static_cast<std::size_t>(index)]
                 : nullptr;
  // Each worker owns one contiguous segment of the tasks and claims it front to back, so that the
  // weight rows it streams continue where its last task ended and the kernel's prefetch of the
  // next rows lands in its own next task (a single counter dealt the tasks out in turn, and each
  // task began with a cold block). Then it claims from the other segments in turn: a worker that
  // is late, preempted or sitting out leaves its segment to the others.
  for (int offset = 0; offset < workers_; ++offset) {
    const int segment = (worker + offset) % workers_;
    const int64_t begin = ins.tasks * segment / workers_;
    const int64_t end = ins.tasks * (segment + 1) / workers_;
    auto& claims = claims_[static_cast<std::size_t>(index) * static_cast<std::size_t>(workers_) +
                           static_cast<std::size_t>(segment)]
                       .value;
    for (;;) {
      int64_t task = begin + static_cast<int64_t>(claims.fetch_add(1, std::memory_order_relaxed));
      if (task >= end) break;
      uint64_t start = stats != nullptr ? now_ns() : 0;
      wait_for(ins, task, step, context.spin_rounds);
      uint64_t ready = stats != nullptr ? now_ns() : 0;
      try {
        if (!prologue_done) {
          run_prologue(ins, *this, context);
          prologue_done = true;
        }
        run_task(ins, task, *this, context);
      } catch (const std::exception& e) {
        record_failure(e.what());
      }
      complete(index, task, step);
      if (stats != nullptr) {
        uint64_t end_ns = now_ns();
        stats->tasks += 1;
        stats->wait_ns += ready - start;
        stats->busy_ns += end_ns - ready;
      }
    }
  }
}

void Program::run_worker(int worker, uint64_t step, int spin_rounds) {
  contexts_[static_cast<std::size_t>(worker)].spin_rounds = spin_rounds;
  for (std::size_t i = 0; i < instructions_.size(); ++i) {
    run_instruction(worker, static_cast<int32_t>(i), step);
  }
}

void Program::set_profiling(bool on) {
  profiling_ = on;
}

void Program::reset_profile() {
  for (auto& per_worker : profile_)
    std::fill(per_worker.begin(), per_worker.end(), InstructionProfile{});
  profiled_steps_ = 0;
}

std::string Program::describe() const {
  std::size_t bytes = 0;
  for (const Instruction& ins : instructions_) bytes += weight_bytes(ins);
  std::string out = fmt::format("{} instructions, {} workers, {:.2f} MB of weights per step\n",
                                instructions_.size(), workers_, static_cast<double>(bytes) / 1e6);
  out += fmt::format("  {:>4}  {:<14} {:<28} {:>6} {:>11}  waits for\n", "#", "opcode", "name",
                     "tasks", "bytes");
  for (std::size_t i = 0; i < instructions_.size(); ++i) {
    const Instruction& ins = instructions_[i];
    std::string waits;
    for (const Dependency& d : ins.waits) {
      const Instruction& p = instructions_[static_cast<std::size_t>(d.producer)];
      waits += d.begin == 0 && d.end == p.tasks
                   ? fmt::format(" #{} (all)", d.producer)
                   : fmt::format(" #{}[{},{})", d.producer, d.begin, d.end);
    }
    if (!ins.task_waits.empty()) {
      // Summarised: which producers the tasks read, and how many producer tiles a task waits for.
      std::vector<int32_t> producers;
      int64_t most = 0;
      for (const auto& list : ins.task_waits) {
        int64_t tiles = 0;
        for (const Dependency& d : list) {
          if (std::find(producers.begin(), producers.end(), d.producer) == producers.end()) {
            producers.push_back(d.producer);
          }
          tiles += d.end - d.begin;
        }
        most = std::max(most, tiles);
      }
      for (int32_t p : producers) waits += fmt::format(" #{} per task", p);
      waits += fmt::format(" (at most {} tiles)", most);
    }
    out += fmt::format("  {:>4}  {:<14} {:<28} {:>6} {:>11} {}\n", i, opcode_name(ins.opcode()),
                       ins.name, ins.tasks, weight_bytes(ins), waits.empty() ? " -" : waits);
  }
  return out;
}

}  // namespace md::program
