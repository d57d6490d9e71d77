// Random bf16 weights generated in memory for built-in benchmark shapes (`megadecode bench
// --synthetic`), so that decode speed can be measured without a checkpoint on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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
  // `count` such values widened to f32 (small vectors the models keep in f32).
  std::vector<float> values(int64_t count, float scale);
  // A zero-centred norm weight γ of that spread as the scale 1 + γ it is applied as.
  std::vector<float> centred_scale(int64_t count, float spread);
  // [rows, cols] scaled like 1/sqrt(cols), so activations keep their size through a layer.
  kernels::Bf16Matrix matrix(int64_t rows, int64_t cols);
  // `count` bytes `base | (random & mask)`: packed codes (mask 0xff) or scale codes confined to a
  // range of exponents (a base and a narrow mask).
  const uint8_t* bytes(int64_t count, uint8_t base, uint8_t mask);
  // Everything handed out so far, for the model's resident-weights figure.
  std::size_t bytes_handed_out() const { return handed_out_; }

 private:
  OwnedWeights& owned_;
  ThreadPool& pool_;
  uint64_t seed_;
  std::size_t handed_out_ = 0;
};

}  // namespace md
