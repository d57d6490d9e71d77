// Rotary position embedding, NeoX "rotate-half" pairing inside the rotary slice: for j < D/2 the
// pair (x_j, x_{j+D/2}) is rotated by angle p·θ^(-2j/D); dimensions D..head_dim-1 pass through.
#pragma once

#include <cstdint>
#include <vector>

namespace md::kernels {

class Rope {
 public:
  Rope(int64_t rotary_dim, double theta);

  int64_t rotary_dim() const { return rotary_dim_; }
  // cos and sin of the D/2 angles at `position`, f32 (angle = f32(p) · inv_freq in f32, as the
  // references compute it).
  void angles(int64_t position, float* cos_out, float* sin_out) const;
  // Rotates one head vector in place with precomputed angles.
  void apply(float* x, const float* cos_values, const float* sin_values) const;

 private:
  int64_t rotary_dim_;
  std::vector<float> inv_freq_;
};

}  // namespace md::kernels
