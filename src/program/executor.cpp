#include "program/executor.h"

#include "base/error.h"
#include "program/cpu_executor.h"
#include "program/op_executor.h"

namespace md::program {

std::string_view executor_name(ExecutorKind kind) {
  switch (kind) {
    case ExecutorKind::kMega:
      return "mega";
    case ExecutorKind::kOps:
      return "ops";
    case ExecutorKind::kReference:
      return "reference";
  }
  return "?";
}

std::unique_ptr<Executor> make_executor(ExecutorKind kind, int threads) {
  switch (kind) {
    case ExecutorKind::kMega:
      return std::make_unique<CpuExecutor>(threads);
    case ExecutorKind::kOps:
      return std::make_unique<OpExecutor>(threads);
    case ExecutorKind::kReference:
      break;
  }
  fail("the reference forward is not a program executor");
}

Executor& Executors::get(ExecutorKind kind) {
  std::unique_ptr<Executor>& slot = kind == ExecutorKind::kOps ? ops_ : mega_;
  if (!slot) slot = make_executor(kind, threads_);
  return *slot;
}

}  // namespace md::program
