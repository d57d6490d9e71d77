// One interface for whatever runs a Program: the fused CPU interpreter on a persistent team
// (cpu_executor.h), the op-by-op baseline (op_executor.h), and later a CUDA interpreter of the
// same instructions. Which one runs is chosen here alone (make_executor); models only hold one.
#pragma once

#include <memory>
#include <string_view>

#include "program/program.h"

namespace md::program {

// How decode steps run: the fused megakernel program on a persistent team (default), the same
// program op by op with a barrier after each instruction, or (no executor at all) the family's
// plain reference forward.
enum class ExecutorKind { kMega, kOps, kReference };
std::string_view executor_name(ExecutorKind kind);

class Executor {
 public:
  virtual ~Executor() = default;
  virtual ExecutorKind kind() const = 0;
  virtual int threads() const = 0;
  // Runs one step of `program` (built for threads() workers) and returns when every task is done.
  virtual void run(Program& program) = 0;
};

// Throws md::Error for kReference, which is not a program executor.
std::unique_ptr<Executor> make_executor(ExecutorKind kind, int threads);

// The executors one model runs its programs on: one of each kind, made on first use, all with
// the same team size.
class Executors {
 public:
  explicit Executors(int threads) : threads_(threads) {}
  int threads() const { return threads_; }
  Executor& get(ExecutorKind kind);

 private:
  int threads_;
  std::unique_ptr<Executor> mega_, ops_;
};

}  // namespace md::program
