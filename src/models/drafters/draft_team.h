// The workers a block drafter's fused rounds run on. A drafter and its target take turns on the
// same cores, so the drafter borrows the target's persistent team when it has one of the same
// size and kind (two spinning teams would fight over the cores); otherwise it keeps its own.
#pragma once

#include <memory>

#include "models/drafters/speculative_drafter.h"
#include "program/executor.h"

namespace md {

class DraftTeam {
 public:
  // The executor for `workers` workers of `kind`, chosen on the first call and kept after it.
  program::Executor& get(const TargetView& target, int workers, ExecutorKind kind) {
    if (executor_ == nullptr) {
      const bool shared = target.executor != nullptr && target.executor->threads() == workers &&
                          target.executor->kind() == kind;
      if (shared) {
        executor_ = target.executor;
      } else {
        own_ = std::make_unique<program::Executors>(workers);
        executor_ = &own_->get(kind);
      }
    }
    return *executor_;
  }

 private:
  program::Executor* executor_ = nullptr;
  std::unique_ptr<program::Executors> own_;
};

}  // namespace md
