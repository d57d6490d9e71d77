// One routed expert's output joining a row's mix after its own norm (Muse Spark's post-expert
// norm, spec §4.4): the reference forward and the programs' moe_mix call this one function, so
// both round alike.
#pragma once

#include <cstdint>

namespace md::kernels {

// expert ← norm(expert) (kernels::scaled_rms_norm with `scale`, which may be null), then
// mixed[i] += weight · expert[i] for i < n.
void mix_expert_output(float* expert, const float* scale, float eps, float weight, int64_t n,
                       float* mixed);

}  // namespace md::kernels
