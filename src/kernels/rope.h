// Rotary position embedding inside the rotary slice of D dimensions: for j < D/2 a pair of
// elements is rotated by angle p·θ^(-2j/D); dimensions D..head_dim-1 pass through. The pair is
// (x_j, x_{j+D/2}) in NeoX's "rotate-half" layout (Hugging Face checkpoints) or (x_{2j}, x_{2j+1})
// for rows stored adjacent-paired (GGUF files from llama.cpp's converter permute q and k rows so).
#pragma once

#include <cstdint>
#include <vector>

namespace md::kernels {

enum class RopePairing { kHalf, kAdjacent };

class Rope {
 public:
  Rope(int64_t rotary_dim, double theta, RopePairing pairing = RopePairing::kHalf);

  int64_t rotary_dim() const { return rotary_dim_; }
  // cos and sin of the D/2 angles at `position`, f32 (angle = f32(p) · inv_freq in f32, as the
  // references compute it).
  void angles(int64_t position, float* cos_out, float* sin_out) const;
  // Rotates one head vector in place with precomputed angles.
  void apply(float* x, const float* cos_values, const float* sin_values) const;

 private:
  int64_t rotary_dim_;
  RopePairing pairing_;
  std::vector<float> inv_freq_;
};

}  // namespace md::kernels
