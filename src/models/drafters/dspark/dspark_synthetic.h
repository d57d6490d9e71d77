// A DSpark drafter with random weights generated in memory, shaped like the published Kimi K3
// drafter scaled to a target's widths (§13.1: 5 layers, 6 query heads per KV head of 64, an MLP
// of twice the hidden size, a Markov head of rank 256, a window of 2048, blocks of 8), so that
// `bench --synthetic … --draft synthetic` times rounds without a checkpoint on disk.
#pragma once

#include <memory>

#include "models/drafters/dspark/dspark_drafter.h"

namespace md {

DSparkConfig synthetic_dspark_config(const TargetView& target);
// The embedding shares lm_head's storage (a round reads 8 of its rows).
std::unique_ptr<DSparkDrafter> make_synthetic_dspark(const TargetView& target, int threads,
                                                     const DSparkOptions& options = {});

}  // namespace md
