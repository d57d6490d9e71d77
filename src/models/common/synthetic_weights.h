// Random bf16 weights generated in memory for built-in benchmark shapes (`megadecode bench
// --synthetic`), so that decode speed can be measured without a checkpoint on disk.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/bf16_matrix.h"
#include "models/common/weight_binder.h"

namespace md {

// Hands out tensors filled from a counter-based generator: the same values for the same sequence
// of requests whatever the thread count. Storage is appended to `owned`.
class SyntheticWeights {
 public:
  SyntheticWeights(OwnedWeights& owned, ThreadPool& pool, uint64_t seed = 0)
      : owned_(owned), pool_(pool), seed_(seed) {}

  // `count` values of magnitude about `scale`.
  const uint16_t* tensor(int64_t count, float scale);
  // [rows, cols] scaled like 1/sqrt(cols), so activations keep their size through a layer.
  kernels::Bf16Matrix matrix(int64_t rows, int64_t cols);

 private:
  OwnedWeights& owned_;
  ThreadPool& pool_;
  uint64_t seed_;
};

}  // namespace md
