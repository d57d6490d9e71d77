// Muse Spark's expert routing (docs/models/muse-spark-nvfp4.md §4.4): scores sigmoid(z ·
// output_multiplier) from an f32 router over the pre-FFN normed stream; the selection adds the
// correction bias and takes the k largest by iterated argmax, the lowest index winning ties; the
// mix weights are the unbiased scores over their sum (+1e-15), in selection order.
#pragma once

#include <cstdint>
#include <vector>

#include "models/musespark/musespark_config.h"
#include "models/musespark/musespark_weights.h"

namespace md {

struct MuseRoute {
  std::vector<int64_t> experts;  // in selection order
  std::vector<float> weights;
};

// The route of one row `x` (hidden_size floats) through layer weights `w`.
MuseRoute muse_route(const MuseLayerWeights& w, const MuseSparkConfig& c, const float* x);

}  // namespace md
