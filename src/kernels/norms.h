// Normalisations over one vector, f32 in and out, weights bf16 read in place.
#pragma once

#include <cstdint>

#include "kernels/activations.h"

namespace md::kernels {

// How an RMSNorm applies its weight: Qwen3.5's zero-centred (1 + w) or the plain Qwen3/Llama w.
enum class NormWeight { kZeroCentred, kPlain };

// y = x / sqrt(mean(x²) + eps) · scale(w). `w` may be null for an unweighted norm. y may alias x.
void rms_norm(const float* x, const uint16_t* w, int64_t n, float eps, NormWeight kind, float* y);

// The same with a plain f32 weight (GGUF files store norm weights as F32).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

// y = x / sqrt(mean(x²) + eps), no weight. y may alias x.
void rms_norm_unweighted(const float* x, int64_t n, float eps, float* y);

// x ← x ⊙ scale / rms(x ⊙ scale) (scale null: x / rms(x)): a norm whose weight multiplies before
// the normalisation (Muse Spark's post-FFN and post-expert norms).
void scaled_rms_norm(float* x, const float* scale, int64_t n, float eps);

// Gated RMSNorm of a delta-rule head's output: y = rms(o) · w · gate(z), plain f32 weight (widened
// from bf16 at load, or F32 in a GGUF); the gate is SiLU for Qwen's GDN (spec §4), σ for Kimi's
// KDA. y may alias o.
void gated_rms_norm(const float* o, const float* z, const float* w, int64_t n, float eps, float* y,
                    Activation gate = Activation::kSilu);

// x ← x / sqrt(Σ x² + eps), the epsilon added to the sum (not the mean), as in the delta-net
// reference; then multiplied by `scale`.
void l2_normalize(float* x, int64_t n, float eps, float scale);

}  // namespace md::kernels
