#include "models/drafters/pending_draft_context.h"

#include <algorithm>

#include "base/error.h"

namespace md {

PendingDraftContext::PendingDraftContext(const DraftContextSpec& spec, const kernels::Rope& rope,
                                         ThreadPool* pool, int64_t max_pending,
                                         DraftContextProgram* program)
    : context_(spec, rope, pool, program),
      width_(spec.fc_in_features()),
      max_pending_(max_pending),
      pending_taps_(static_cast<std::size_t>(max_pending * spec.fc_in_features())) {}

PendingDraftContext::PendingDraftContext(const PendingDraftContext& other) = default;

void PendingDraftContext::append(std::span<const float> taps, int64_t rows) {
  const bool small =
      rows >= 0 && rows <= max_pending_ && static_cast<int64_t>(taps.size()) == rows * width_;
  if (!small) {
    // In order: waiting positions are older. DraftContext::append refuses a malformed append.
    flush();
    context_.append(taps, rows);
    return;
  }
  if (pending_rows_ + rows > max_pending_) flush();
  std::copy(taps.begin(), taps.end(), pending_taps_.begin() + pending_rows_ * width_);
  pending_rows_ += rows;
}

void PendingDraftContext::flush() {
  if (pending_rows_ == 0) return;
  // The same features a round's program would compute (matmul rows do not depend on the batch);
  // their K/V follow through DraftContext::prepare_keys.
  const auto values = static_cast<std::size_t>(pending_rows_ * width_);
  context_.append(std::span<const float>(pending_taps_).first(values), pending_rows_);
  pending_rows_ = 0;
}

void PendingDraftContext::truncate(int64_t length) {
  const int64_t stored = context_.length();
  if (length < 0 || length > stored + pending_rows_) {
    fail("draft context: cannot truncate {} positions to {}", stored + pending_rows_, length);
  }
  if (length >= stored) {
    pending_rows_ = length - stored;  // the waiting positions past the cut are dropped unseen
    return;
  }
  pending_rows_ = 0;
  context_.truncate(length);
}

std::pair<const float*, int64_t> PendingDraftContext::take_pending() {
  const int64_t rows = pending_rows_;
  pending_rows_ = 0;
  return {pending_taps_.data(), rows};
}

}  // namespace md
