// How the Qwen3.8 reference forward evaluates the model. The defaults are what users run; the
// rest exists for tests (prefill-vs-recurrence checks and negative controls).
#pragma once

#include <cstdint>

namespace md {

// Deliberate formula changes used only by tests to prove that golden comparisons can fail.
enum class Qwen38Ablation {
  kNone,
  kSkipConv,            // GDN: feed the projections to the delta rule without the short conv
  kSkipAttentionGate,   // attention: drop the sigmoid output gate
  kTiledKeyHeads,       // GDN: value head j uses key head j mod n_k instead of ⌊j / group⌋
};

struct Qwen38Options {
  // Multi-token forwards run the delta rule chunk by chunk (spec §8.3); false runs it token by
  // token, as decode does.
  bool chunked_delta_rule = true;
  int64_t delta_rule_chunk = 64;
  Qwen38Ablation ablation = Qwen38Ablation::kNone;
};

}  // namespace md
