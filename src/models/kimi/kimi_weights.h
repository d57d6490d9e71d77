// Kimi K3's text-model tensors bound to the checkpoint (docs/models/kimi-k3-dspark.md §3): dense
// matrices read in place as bf16, small vectors widened to f32, the attention-residual weights
// folded at load (norm ⊙ projection, exact algebra: a mix's score is proj · RMSNorm(v)), KDA's
// A_log narrowed to one entry per head and held as exp(A_log), and the routed experts as MXFP4
// matrices read in place (scale bytes 0 and 255 refused). The vision tower is not read.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/moe_routing.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"
#include "models/kimi/kimi_config.h"

namespace md {

// KDA (§6): projections [C, H] (head h = rows h·d … h·d + d − 1), short convs [C][K] (tap K − 1
// multiplies the current token), the low-rank decay f_b(f_a(x)), one exp(A_log) per head, dt_bias
// per channel, β logits per head, the output norm shared by the heads.
struct KimiKdaWeights {
  kernels::WeightMatrix q_proj, k_proj, v_proj, f_a_proj, f_b_proj, b_proj;
  std::vector<float> q_conv, k_conv, v_conv;  // [C][K]
  std::vector<float> exp_a_log;               // [heads]: exp(A_log[h]), the first `heads` stored
  std::vector<float> dt_bias;                 // [C]
  std::vector<float> o_norm;                  // [d]
};

// MLA without RoPE (§7): the query and key/value low-rank paths and their norms.
struct KimiMlaWeights {
  kernels::WeightMatrix q_a_proj, q_b_proj, kv_a_proj, kv_b_proj;
  std::vector<float> q_a_norm, kv_a_norm;
};

// The latent MoE of layers ≥ first_k_dense_replace (§8.3–§8.5).
struct KimiMoeWeights {
  kernels::WeightMatrix router;                  // [E, H]
  std::vector<float> router_bias;                // [E] e_score_correction_bias
  kernels::WeightMatrix latent_down, latent_up;  // H → latent, latent → H
  std::vector<float> latent_norm;                // [latent]
  kernels::WeightMatrix shared_gate, shared_up, shared_down;
  kernels::ExpertMatrices experts;  // MXFP4: w1 (gate), w3 (up), w2 (down)
};

struct KimiLayerWeights {
  std::vector<float> input_norm, post_attention_norm;      // [H]
  std::vector<float> attention_mix, mlp_mix;               // wA, wM: res_norm ⊙ res_proj [H]
  kernels::WeightMatrix g_proj, o_proj;                    // output gate and output (both kinds)
  KimiKdaWeights kda;                                      // KDA layers
  KimiMlaWeights mla;                                      // MLA layers
  kernels::WeightMatrix dense_gate, dense_up, dense_down;  // the dense layers
  KimiMoeWeights moe;                                      // the MoE layers
};

struct KimiK3Weights {
  kernels::WeightMatrix embed_tokens, lm_head;
  std::vector<float> final_norm;
  std::vector<float> output_mix;  // wO: output_attn_res_norm ⊙ output_attn_res_proj [H]
  std::vector<KimiLayerWeights> layers;
  OwnedWeights owned;
  // Under tensor parallelism: slices copied at load, and the rank's pack when read from one.
  std::vector<std::unique_ptr<std::uint8_t[]>> sliced;
  std::shared_ptr<const void> slice_storage;
};

// Binds every tensor of the text model. Throws md::Error naming the tensor, its file and the
// mismatch: missing, dtype, shape, an A_log shorter than the heads, an MXFP4 scale byte of 0 or
// 255 (with its row and group).
KimiK3Weights bind_kimi_k3_weights(const Checkpoint& checkpoint, const KimiK3Config& config);

}  // namespace md
