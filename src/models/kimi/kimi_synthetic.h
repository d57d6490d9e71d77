// Built-in Kimi K3 shapes with random weights generated in memory, so that `megadecode bench`
// measures decode speed without a checkpoint on disk.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/kimi/kimi_model.h"

namespace md {

// "kimi-k3-tiny": the §15 geometry (10 layers, MLA at {3, 7, 9}, hidden 256, 16 experts top-4).
// "kimi-k3-layer": the published widths (hidden 7168, KDA 96 × 128, MLA 96 heads with q_lora
// 1536 and kv_lora 512, 896 experts top-16 of 3072 over a latent of 3584, 2 shared experts,
// vocab 163840) for three layers: 0 KDA with the dense MLP of 33792, 1 KDA and 2 MLA with the
// latent MoE (every kind of sublayer K3 has). "kimi-k3-edges": what the fixtures leave out, for
// tests: a new block at every layer (block size 1), MLA at layer 0, no shared experts.
std::vector<std::string> synthetic_kimi_shapes();
bool is_synthetic_kimi_shape(const std::string& shape);
KimiK3Config synthetic_kimi_config(const std::string& shape);  // md::Error if unknown

// Distinct experts a "kimi-k3-layer" layer stores: 896 MXFP4 experts (17.5 MiB each) would take
// 15 GiB per layer, so expert e reads slot e % 16 (each slot is larger than the last-level cache;
// a step's figures count each expert it ran as read from memory).
inline constexpr int64_t kSyntheticKimiExpertSlots = 16;

// Weights drawn from a fixed seed, scaled so that activations keep their size through a layer;
// MXFP4 experts with random codes and scale bytes 120…127. The embedding shares lm_head's storage
// (a step reads one of its rows).
std::unique_ptr<KimiModel> make_synthetic_kimi(const std::string& shape,
                                               const ModelRunOptions& options);

}  // namespace md
