// Muse Spark's expert routing (docs/models/muse-spark-nvfp4.md §4.4): scores sigmoid(z ·
// output_multiplier) from an f32 router over the pre-FFN normed stream; the selection adds the
// correction bias and takes the k largest by iterated argmax, the lowest index winning ties; the
// mix weights are the unbiased scores over their sum (+1e-15), in selection order
// (kernels::route_sigmoid_bias_top_k, which the fused step's routing instruction runs too).
#pragma once

#include <cstdint>
#include <vector>

#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_weights.h"

namespace md {

// What Muse's router adds to the chosen scores' sum before dividing each weight by it.
inline constexpr float kMuseRouterSumEpsilon = 1e-15f;

struct MuseRoute {
  std::vector<int64_t> experts;  // in selection order
  std::vector<float> weights;
};

// The layer's f32 router [experts][hidden] as a matrix the shared kernels (and a program's
// projection tiles) multiply: the reference and the fused step compute the same logits.
kernels::WeightMatrix muse_router_matrix(const MuseLayerWeights& w, const MuseSparkConfig& c);

// The route of one row `x` (hidden_size floats) through layer weights `w`.
MuseRoute muse_route(const MuseLayerWeights& w, const MuseSparkConfig& c, const float* x);

}  // namespace md
