// A block drafter's context store (draft_context.h) with a short queue in front of it, for
// drafters whose rounds run as a fused program: the few positions a verify step commits wait
// here, and the next round's program computes their features and K/V itself (the weight tiles
// it streams anyway). A larger append (a prompt) goes straight to the store.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/drafters/draft_context.h"

namespace md {

class PendingDraftContext {
 public:
  // At most `max_pending` positions wait (0: none; every append reaches the store at once).
  // The references must outlive this; `program` as DraftContext takes it.
  PendingDraftContext(const DraftContextSpec& spec, const kernels::Rope& rope, ThreadPool* pool,
                      int64_t max_pending, DraftContextProgram* program = nullptr);
  PendingDraftContext(const PendingDraftContext& other);
  PendingDraftContext& operator=(const PendingDraftContext&) = delete;

  // Positions committed so far, waiting ones included.
  int64_t length() const { return context_.length() + pending_rows_; }
  // `taps`: rows × (num_taps · hidden) floats for positions length() .. length()+rows-1.
  void append(std::span<const float> taps, int64_t rows);
  // Forgets positions >= length (md::Error beyond length()).
  void truncate(int64_t length);
  // Computes the waiting positions into the store.
  void flush();

  // The stored positions (call flush() first to include the waiting ones).
  DraftContext& stored() { return context_; }
  // Hands the waiting positions to a round's program: their taps ([rows][taps · hidden], valid
  // until the next append) and count; they are no longer waiting (the program computes them).
  std::pair<const float*, int64_t> take_pending();

 private:
  DraftContext context_;
  int64_t width_;  // taps · hidden floats per position
  int64_t max_pending_;
  std::vector<float> pending_taps_;  // [max_pending][taps · hidden]
  int64_t pending_rows_ = 0;
};

}  // namespace md
