// A DFlash2 drafter with random weights for any Qwen3.8 target, generated in memory, so that
// `megadecode bench --synthetic SHAPE --draft synthetic` times speculative rounds at a realistic
// size without a checkpoint. Its proposals are noise: only forced acceptance lengths mean
// anything.
#pragma once

#include <memory>

#include "models/drafters/dflash2/dflash2_drafter.h"

namespace md {

// The published drafter's proportions (real-configs.md §1c: 5 layers, head_dim 128, MLP 3.4×
// hidden, 5 taps spread over the target's layers, window 2048, selector rank 256 / top-k 16,
// block 8) scaled to the target's hidden size, vocabulary and depth.
DFlash2Config synthetic_dflash2_config(const TargetView& target);

std::unique_ptr<DFlash2Drafter> make_synthetic_dflash2(const TargetView& target, int threads,
                                                       const DFlash2Options& options = {});

}  // namespace md
