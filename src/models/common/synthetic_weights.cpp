#include "models/common/synthetic_weights.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace md {

namespace {

// Fills bf16 values of magnitude about `scale` from splitmix64 of the element index, in parallel.
void fill_random(uint16_t* data, int64_t count, float scale, uint64_t seed, ThreadPool& pool) {
  int exponent = static_cast<int>(std::floor(std::log2(scale))) + 127;
  constexpr int64_t kBlock = 1 << 16;
  pool.parallel_for((count + kBlock - 1) / kBlock, [&](int64_t first, int64_t last) {
    for (int64_t block = first; block < last; ++block) {
      for (int64_t i = block * kBlock; i < std::min(count, (block + 1) * kBlock); ++i) {
        uint64_t z = seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        // sign, exponent in [e-2, e], 7 random mantissa bits
        auto e = static_cast<uint16_t>(exponent - static_cast<int>((z >> 8) % 3));
        data[i] = static_cast<uint16_t>(((z & 1) << 15) | (e << 7) | ((z >> 16) & 0x7f));
      }
    }
  });
}

}  // namespace

const uint16_t* SyntheticWeights::tensor(int64_t count, float scale) {
  owned_.push_back(std::make_unique<uint16_t[]>(static_cast<std::size_t>(count)));
  fill_random(owned_.back().get(), count, scale, ++seed_ * 0x1234567ull, pool_);
  return owned_.back().get();
}

kernels::Bf16Matrix SyntheticWeights::matrix(int64_t rows, int64_t cols) {
  return {tensor(rows * cols, 1.0f / std::sqrt(static_cast<float>(cols))), rows, cols};
}

}  // namespace md
