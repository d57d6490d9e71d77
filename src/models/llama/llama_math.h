// The per-row arithmetic the Llama reference forward and the step program share (RMSNorm with
// plain f32 weights, RoPE on adjacent pairs). Both call these same functions so that a row of a
// step is bitwise the row of the reference: nothing here may be re-derived elsewhere.
#pragma once

#include <cstdint>
#include <vector>

namespace md::llama {

// y = x / rms(x) · w for each of `rows` rows of `width` (sum of squares in double).
void rms_norm_rows(const float* x, const std::vector<float>& w, int64_t rows, int64_t width,
                   float eps, float* y);

// θ_j = theta^(-2j / head_dim), j in [0, head_dim / 2).
std::vector<float> rope_inv_freq(int64_t head_dim, double theta);

// cos and sin of position · θ_j, head_dim / 2 each: computed once per row and position, then
// applied to every head.
void rope_angles(int64_t position, const std::vector<float>& inv_freq, float* cos_values,
                 float* sin_values);

// llama.cpp stores q and k rows permuted so that RoPE rotates adjacent pairs (2j, 2j+1); that is
// Hugging Face's rotate-half pairing (j, j + d/2) on the unpermuted weights.
void rope_adjacent(float* x, int64_t head_dim, const float* cos_values, const float* sin_values);

}  // namespace md::llama
