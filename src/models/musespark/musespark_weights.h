// Muse Spark's text-model tensors bound to the checkpoint (docs/models/muse-spark-nvfp4.md §2, §6):
// dense matrices read in place as bf16, small vectors widened to f32 in the form they are applied
// (a zero-centred norm weight γ as its scale 1 + γ, a residual gate as its α and β), experts in
// bf16 or NVFP4 per layer as the tensors present say.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "io/checkpoint.h"
#include "kernels/weight_matrix.h"
#include "models/common/weight_binder.h"
#include "models/musespark/musespark_config.h"

namespace md {

// s ← α ⊙ s + β ⊙ branch, per channel, from the checkpoint's gate g: u = g / temperature,
// β = sigmoid(u), α = sqrt(max(sigmoid(−u) · (1 + β), 1e-3)).
struct MuseResidualGate {
  std::vector<float> alpha;
  std::vector<float> beta;
};

// One layer's routed experts: [E][2I][Hm] gate_up (gate rows first) and [E][Hm][I] down.
struct MuseExperts {
  bool nvfp4 = false;
  // Experts with storage of their own; expert e reads slot e % stored_experts. A checkpoint stores
  // every expert (0: all of them); a synthetic real-width layer backs 256 experts with a few slots
  // so that it fits in memory (musespark_synthetic.h).
  int64_t stored_experts = 0;
  // bf16: the matrices in place.
  const uint16_t* gate_up = nullptr;
  const uint16_t* down = nullptr;
  // NVFP4: packed codes ([E][2I][Hm/2], [E][Hm][I/2]), e4m3 block scales ([E][2I][Hm/16],
  // [E][Hm][I/16]) and global scales ([E][2]: gate half, up half; [E]).
  const uint8_t* gate_up_codes = nullptr;
  const uint8_t* gate_up_scales = nullptr;
  std::vector<float> gate_up_global;
  const uint8_t* down_codes = nullptr;
  const uint8_t* down_scales = nullptr;
  std::vector<float> down_global;
};

struct MuseLayerWeights {
  std::vector<float> input_norm;  // 1 + γ
  kernels::WeightMatrix q_proj, k_proj, v_proj, gate_proj, o_proj;
  MuseResidualGate attention_gate;
  std::vector<float> pre_ffn_norm;   // 1 + γ
  std::vector<float> post_ffn_norm;  // 1 + γ, applied before its normalisation
  MuseResidualGate ffn_gate;
  std::vector<float> router;               // [E][H] f32
  std::vector<float> router_bias;          // [E] selection bias
  kernels::WeightMatrix pre_expert_proj;   // H → Hm
  std::vector<float> pre_expert_norm;      // 1 + γ
  std::vector<float> post_expert_norm;     // 1 + γ, applied before its normalisation
  kernels::WeightMatrix post_expert_proj;  // Hm → H
  MuseExperts experts;
};

struct MuseSparkWeights {
  kernels::WeightMatrix embed_tokens;
  kernels::WeightMatrix lm_head;
  std::vector<float> final_norm;  // used as stored (no + 1)
  std::vector<MuseLayerWeights> layers;
  OwnedWeights owned;
  // A tensor-parallel rank's copied slices and the pack it read slices from, if any
  // (musespark_tensor_shard.h).
  std::vector<std::unique_ptr<std::uint8_t[]>> sliced;
  std::shared_ptr<const void> slice_storage;
};

// The floor of α² in the residual gates (transformers, the seed and llama.cpp's converter agree).
inline constexpr double kResidualGateFloor = 1e-3;

// Binds every tensor of the text model; the vision and audio towers are not read. Throws md::Error
// naming the tensor, its file and the mismatch (missing, dtype, shape; a layer holding only some of
// the NVFP4 tensors). `gate_floor` is kResidualGateFloor but for a test's negative control.
MuseSparkWeights bind_musespark_weights(const Checkpoint& checkpoint, const MuseSparkConfig& config,
                                        double gate_floor = kResidualGateFloor);

// §7's int8 dense path: q, k, v, gate, o, pre_expert_proj, post_expert_proj and lm_head
// quantised to int8 with a scale per output row (the router, the embedding table and the experts
// stay as they are). Returns the bytes of the int8 copies (the stored matrices stay mapped).
std::size_t quantize_dense_int8(MuseSparkWeights& weights, ThreadPool* pool);

MuseResidualGate residual_gate_coefficients(const std::vector<float>& gate, double temperature,
                                            double floor);

}  // namespace md
