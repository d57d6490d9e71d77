// exp(x) for x <= 0 in float, branch-free so that a loop over a 250k-token row vectorises (glibc's
// expf is a call per element). Relative error below 3e-7 (a few ulp), which is all that sampling
// probabilities and attention weights need; results below e^-87 (and NaN or -inf inputs) are
// exactly 0.
//
// One sequence of operations, written once (exp_nonpositive_with) for whatever holds the lanes:
// a float here, an AVX2 or AVX-512 register in the attention kernels (attention_avx2.cpp,
// attention_avx512.cpp), so every path gives the same bits. Ops supplies
//   Vec, Mask, broadcast(c), add, sub, mul           (each rounded once: no contraction)
//   at_least(x, c) → Mask                            x >= c, false for NaN
//   select(m, a, b)                                  a where m, else b
//   pow2(n)                                          2^n for integral n in [-126, 0]
//   zero_unless(m, v)                                v where m, else +0
#pragma once

#include <bit>
#include <cstdint>

namespace md::kernels {

template <class Ops>
typename Ops::Vec exp_nonpositive_with(typename Ops::Vec x) {
  using Vec = typename Ops::Vec;
  constexpr float kMinArg = -87.0f;  // e^-87 is still a normal float
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split so that n * kLn2Hi is exact for |n| < 2^11 (Cody and Waite's reduction).
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187045e-06f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // Taylor series to r^7 (Horner, highest power first): truncation error below 1e-8 relative on
  // |r| <= 0.347.
  constexpr float kTaylor[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                               1.0f / 6.0f,    0.5f,          1.0f,          1.0f};
  const auto keep = Ops::at_least(x, kMinArg);
  const Vec xc = Ops::select(keep, x, Ops::broadcast(kMinArg));
  const Vec magic = Ops::broadcast(kRoundMagic);
  // The nearest integer, in [-126, 0].
  const Vec n = Ops::sub(Ops::add(Ops::mul(xc, Ops::broadcast(kLog2e)), magic), magic);
  // |r| <= ln(2) / 2
  const Vec r = Ops::sub(Ops::sub(xc, Ops::mul(n, Ops::broadcast(kLn2Hi))),
                         Ops::mul(n, Ops::broadcast(kLn2Lo)));
  Vec p = Ops::broadcast(kTaylor[0]);
  for (int i = 1; i < 8; ++i) p = Ops::add(Ops::mul(p, r), Ops::broadcast(kTaylor[i]));
  return Ops::zero_unless(keep, Ops::mul(p, Ops::pow2(n)));
}

// The Ops of one float. Selections are bit masks, not `?:` on floats: with the default
// -ftrapping-math GCC will not if-convert a float select, and a loop would not vectorise.
struct ScalarExpOps {
  using Vec = float;
  using Mask = uint32_t;
  static float broadcast(float c) { return c; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static Mask at_least(float x, float c) { return x >= c ? 0xFFFFFFFFu : 0u; }
  static float select(Mask m, float a, float b) {
    return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) |
                                (std::bit_cast<uint32_t>(b) & ~m));
  }
  static float pow2(float n) {
    return std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  }
  static float zero_unless(Mask m, float v) {
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) & m);
  }
};

inline float exp_nonpositive(float x) {
  return exp_nonpositive_with<ScalarExpOps>(x);
}

}  // namespace md::kernels
