// Test seam of the batch scheduler: a fault it injects on cue, so that tests (and, through
// `serve`'s hidden --test-fault-after-tokens, the HTTP end-to-end tests) can watch one request
// fail part-way while the others carry on. Production leaves every hook off (the defaults).
#pragma once

#include <cstdint>

namespace md::testing {

struct SchedulerHooks {
  int64_t fault_after_tokens = 0;  // each choice fails after this many tokens (0: off)
};

}  // namespace md::testing
