// The portable path of kernels/attention.h: one lane per "register", std::fma for each fused
// step (a library call where the compiler may not assume FMA hardware; exact either way).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/attention_tiles.h"

namespace md::kernels {

namespace {

// The arithmetic and the exp's lane operations are ScalarExpOps' (kernels/fast_exp.h).
struct Scalar : ScalarExpOps {
  static constexpr int64_t kLanes = 1;
  static constexpr int tiles_for(int) { return 1; }

  static Vec zero() { return 0.0f; }
  static Vec load(const float* p) { return *p; }
  static Vec load(const uint16_t* p) { return bf16_to_f32(*p); }
  static void store(float* p, Vec v) { *p = v; }
  static Vec fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
  static Vec max(Vec a, Vec b) { return std::max(a, b); }
  static float reduce_max(Vec v) { return v; }
};

}  // namespace

const AttentionKernels kAttentionScalar = attention_tiles::kKernels<Scalar>;

}  // namespace md::kernels
