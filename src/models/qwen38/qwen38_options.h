// How the Qwen3.8 reference forward evaluates the model. The defaults are what users run; the
// rest exists for tests (prefill-vs-recurrence checks, and negative controls through the test
// seam of qwen38_testing.h).
#pragma once

#include <cstdint>

namespace md {

namespace testing {
enum class Qwen38Ablation : int;  // qwen38_testing.h
}  // namespace testing

struct Qwen38Options {
  // Multi-token forwards run the delta rule chunk by chunk (spec §8.3); false runs it token by
  // token, as decode does.
  bool chunked_delta_rule = true;
  int64_t delta_rule_chunk = 64;
  // Test seam: value-initialised, the model as specified.
  testing::Qwen38Ablation ablation{};
};

}  // namespace md
