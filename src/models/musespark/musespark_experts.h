// One layer's routed experts as the shared MoE kernels read them (kernels::ExpertMatrices): per
// expert the gate half and the up half of gate_up (each NVFP4 half with its own global scale) and
// down, as views in their format. The reference MoE and the fused step's expert instructions
// multiply these same matrices.
#pragma once

#include "kernels/moe_routing.h"
#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_weights.h"

namespace md {

// Expert e of the lists reads storage slot e % stored_experts where the layer aliases its
// experts (synthetic shapes), its own slot otherwise.
kernels::ExpertMatrices muse_expert_matrices(const MuseExperts& w, const MuseSparkConfig& c);

}  // namespace md
