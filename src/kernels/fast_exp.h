// exp(x) for x <= 0 in float, branch-free so that a loop over a 250k-token row vectorises (glibc's
// expf is a call per element). Relative error below 3e-7 (a few ulp), which is all that sampling
// probabilities need; results below e^-87 (and NaN or -inf inputs) are exactly 0.
#pragma once

#include <bit>
#include <cstdint>

namespace md::kernels {

inline float exp_nonpositive(float x) {
  constexpr float kMinArg = -87.0f;  // e^-87 is still a normal float
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split so that n * kLn2Hi is exact for |n| < 2^11 (Cody and Waite's reduction).
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187045e-06f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // Selections are bit masks, not `?:` on floats: with the default -ftrapping-math GCC will not
  // if-convert a float select, and the loop would not vectorise. `keep` is false for NaN and -inf.
  const uint32_t keep = x >= kMinArg ? 0xFFFFFFFFu : 0u;
  const float xc = std::bit_cast<float>((std::bit_cast<uint32_t>(x) & keep) |
                                        (std::bit_cast<uint32_t>(kMinArg) & ~keep));
  const float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;  // nearest integer, in [-126, 0]
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;             // |r| <= ln(2) / 2
  // Taylor series to r^7: truncation error below 1e-8 relative on |r| <= 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t scale = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // 2^n
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * std::bit_cast<float>(scale)) & keep);
}

}  // namespace md::kernels
