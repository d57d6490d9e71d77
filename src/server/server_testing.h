// Test seam of the server: hooks that only tests set, through `serve`'s hidden --test-* options,
// to provoke on cue what a healthy server does only by accident. Production leaves every hook off
// (the defaults).
#pragma once

#include <cstdint>
#include <string>

#include "engine/batch_scheduler_testing.h"

namespace md::testing {

struct ServerHooks {
  SchedulerHooks scheduler;   // handed to the batch scheduler (--test-fault-after-tokens)
  int64_t load_delay_ms = 0;  // serve: wait this long before loading the model (503 while it loads)
  // serve: every choice writes this text first (encoded with special tokens parsed into
  // scheduler.scripted_tokens once the tokenizer is loaded; --test-script-output).
  std::string scripted_output;
};

}  // namespace md::testing
