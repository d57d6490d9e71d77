// Counter-based random numbers: the uniform draw for a token position is a pure function of
// (seed, position). Sampled output is then reproducible run to run and independent of batching,
// of call order and of how many positions a speculative round verified at once.
#pragma once

#include <cstdint>

namespace md::engine {

// SplitMix64's output function (Stafford's "Mix13"): a bijection on 64 bits with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The position-th output of a SplitMix64 stream whose starting state is derived from the seed.
// SplitMix64's state is a Weyl counter, so any output can be computed directly without stepping.
constexpr uint64_t random_bits_at(uint64_t seed, int64_t position) {
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;           // SplitMix64's odd increment
  const uint64_t start = mix64(seed ^ 0x6a09e667f3bcc909ULL);  // decorrelates nearby seeds
  return mix64(start + (static_cast<uint64_t>(position) + 1) * kGamma);
}

// Uniform double in [0, 1) with 53 random bits (every value is a multiple of 2^-53).
constexpr double uniform_at(uint64_t seed, int64_t position) {
  return static_cast<double>(random_bits_at(seed, position) >> 11) * 0x1.0p-53;
}

// Independent streams per purpose ("lanes") at the same position: lane 0 is the token draw
// (uniform_at itself); speculative decoding uses lane 1 for the acceptance test, lane 2 for the
// residual draw and lane 3 for the drafter's own sampling.
constexpr double uniform_at_lane(uint64_t seed, int64_t position, int lane) {
  if (lane == 0) return uniform_at(seed, position);
  return uniform_at(mix64(seed + 0x243f6a8885a308d3ULL * static_cast<uint64_t>(lane)), position);
}

}  // namespace md::engine
