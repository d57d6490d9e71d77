// Test seam of kernels/weight_streaming.h: forces the weight walk of products with a few input
// rows while a ForcedWeightStreaming lives (nested ones restore the outer one's walk), so that
// tests run both walks, and compare them bit for bit, on any CPU. Production never constructs one.
#pragma once

#include "kernels/weight_streaming.h"

namespace md::testing {

class ForcedWeightStreaming {
 public:
  explicit ForcedWeightStreaming(kernels::WeightStreaming streaming);
  ~ForcedWeightStreaming();
  ForcedWeightStreaming(const ForcedWeightStreaming&) = delete;
  ForcedWeightStreaming& operator=(const ForcedWeightStreaming&) = delete;

 private:
  int previous_;  // the walk forced before this one, or -1
};

}  // namespace md::testing
