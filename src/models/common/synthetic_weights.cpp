#include "models/common/synthetic_weights.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "base/dtype.h"

namespace md {

namespace {

// splitmix64 of an element index: independent of how the elements are split over threads.
uint64_t mixed(uint64_t seed, int64_t i) {
  uint64_t z = seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Applies fill(first, last) to blocks of [0, count) in parallel.
template <typename Fill>
void in_blocks(int64_t count, ThreadPool& pool, const Fill& fill) {
  constexpr int64_t kBlock = 1 << 16;
  pool.parallel_for((count + kBlock - 1) / kBlock, [&](int64_t first, int64_t last) {
    fill(first * kBlock, std::min(count, last * kBlock));
  });
}

// Fills bf16 values of magnitude about `scale` from splitmix64 of the element index, in parallel.
void fill_random(uint16_t* data, int64_t count, float scale, uint64_t seed, ThreadPool& pool) {
  int exponent = static_cast<int>(std::floor(std::log2(scale))) + 127;
  in_blocks(count, pool, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const uint64_t z = mixed(seed, i);
      // sign, exponent in [e-2, e], 7 random mantissa bits
      auto e = static_cast<uint16_t>(exponent - static_cast<int>((z >> 8) % 3));
      data[i] = static_cast<uint16_t>(((z & 1) << 15) | (e << 7) | ((z >> 16) & 0x7f));
    }
  });
}

}  // namespace

const uint16_t* SyntheticWeights::tensor(int64_t count, float scale) {
  owned_.push_back(std::make_unique<uint16_t[]>(static_cast<std::size_t>(count)));
  handed_out_ += static_cast<std::size_t>(count) * sizeof(uint16_t);
  fill_random(owned_.back().get(), count, scale, ++seed_ * 0x1234567ull, pool_);
  return owned_.back().get();
}

std::vector<float> SyntheticWeights::values(int64_t count, float scale) {
  const uint16_t* bits = tensor(count, scale);
  std::vector<float> out(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = bf16_to_f32(bits[i]);
  return out;
}

std::vector<float> SyntheticWeights::centred_scale(int64_t count, float spread) {
  std::vector<float> w = values(count, spread);
  for (float& x : w) x = 1.0f + x;
  return w;
}

kernels::Bf16Matrix SyntheticWeights::matrix(int64_t rows, int64_t cols) {
  return {tensor(rows * cols, 1.0f / std::sqrt(static_cast<float>(cols))), rows, cols};
}

const uint8_t* SyntheticWeights::bytes(int64_t count, uint8_t base, uint8_t mask) {
  auto* data = static_cast<uint8_t*>(owned_bytes(owned_, static_cast<std::size_t>(count)));
  handed_out_ += static_cast<std::size_t>(count);
  const uint64_t seed = ++seed_ * 0x1234567ull;
  in_blocks(count, pool_, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      data[i] = static_cast<uint8_t>(base | (mixed(seed, i) & mask));
    }
  });
  return data;
}

}  // namespace md
