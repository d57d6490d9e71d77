// Test seam of kernels/weight_streaming.h: forces the walk of one-input-row products while a
// ForcedWeightStreaming lives, so that tests run both walks, and compare them bit for bit, on
// any CPU. Production never constructs one.
#pragma once

#include "kernels/weight_streaming.h"

namespace md::testing {

class ForcedWeightStreaming {
 public:
  explicit ForcedWeightStreaming(kernels::WeightStreaming streaming);
  ~ForcedWeightStreaming();
  ForcedWeightStreaming(const ForcedWeightStreaming&) = delete;
  ForcedWeightStreaming& operator=(const ForcedWeightStreaming&) = delete;
};

}  // namespace md::testing
