// Built-in Muse Spark shapes with random weights generated in memory, so that `megadecode bench`
// measures decode speed without a checkpoint on disk (muse-spark-nvfp4.md §11 item 7).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/musespark/musespark_model.h"

namespace md {

// "muse-spark-tiny": the §11 TINY geometry (6 layers S F S S S F, NVFP4 experts on layers 1–4).
// "muse-spark-layer": the published widths (hidden 8192, 128/16 heads, 256 experts top-8 of
// 4096 × 4096, vocab 202048) for two layers: layer 0 sliding with bf16 experts, layer 1 full
// (NoPE) with NVFP4 experts.
std::vector<std::string> synthetic_musespark_shapes();
bool is_synthetic_musespark_shape(const std::string& shape);
MuseSparkConfig synthetic_musespark_config(const std::string& shape);  // md::Error if unknown

// Distinct experts a "muse-spark-layer" layer stores: 256 bf16 experts of 4096 × 4096 would take
// 24 GiB per layer, so expert e reads slot e % 16. A bf16 slot (96 MiB) exceeds the last-level
// cache (32 MiB here); an NVFP4 slot (27 MiB) nearly fills it, so a slot that two experts of one
// step alias is mostly evicted by the experts run between them (ascending ids) before it is read
// again. A step's figures count each expert it ran as read from memory.
inline constexpr int64_t kSyntheticMuseExpertSlots = 16;

// Weights drawn from a fixed seed (deterministic for any thread count), scaled so that activations
// keep their size through a layer. The embedding table shares lm_head's storage: a step reads one
// of its rows, and two 3 GiB tables of random values would add nothing to a decode measurement.
std::unique_ptr<MuseSparkModel> make_synthetic_musespark(const std::string& shape,
                                                         const ModelRunOptions& options,
                                                         const MuseSparkOptions& muse = {});

}  // namespace md
