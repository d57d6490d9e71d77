// Test seam of the batch scheduler: a fault it injects on cue, a slow prefill, a scripted output,
// so that tests (and, through `serve`'s hidden --test-* options, the HTTP end-to-end tests) can
// watch one request fail part-way while the others carry on, or a long prompt stall running
// streams. Production leaves every hook off (the defaults).
#pragma once

#include <cstdint>
#include <vector>

namespace md::testing {

struct SchedulerHooks {
  int64_t fault_after_tokens = 0;  // each choice fails after this many tokens (0: off)
  // Prefill sleeps this long per prompt token: a slow model, without one (0: off).
  int64_t prefill_delay_us_per_token = 0;
  // Each choice writes these tokens first, whatever its logits say (every other logit is masked
  // to -inf before sampling), then samples as usual: a scripted answer, so that the output
  // parsers run on a model that would never write it (empty: off).
  std::vector<int32_t> scripted_tokens;
};

}  // namespace md::testing
