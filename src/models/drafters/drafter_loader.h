// Opens a drafter checkpoint as the speculative loop sees it, whichever kind its config.json
// describes (DFlash2 or DSpark), and names its method for /props and the logs.
#pragma once

#include <memory>
#include <string>

#include "models/drafters/speculative_drafter.h"
#include "program/executor.h"

namespace md {

struct LoadedDrafter {
  std::unique_ptr<SpeculativeDrafter> drafter;
  std::string method;  // "dflash2", "dspark"
};

// md::Error naming the file when the directory holds no drafter, or one that does not fit the
// target. `executor`: how a drafter with a fused round runs it (DSpark has none yet).
LoadedDrafter load_speculative_drafter(
    const std::string& directory, const TargetView& target, int threads,
    program::ExecutorKind executor = program::ExecutorKind::kMega);

}  // namespace md
