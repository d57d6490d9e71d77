#include "engine/sampling_params.h"

#include <cmath>
#include <string_view>

#include "base/error.h"

namespace md::engine {
namespace {

// Written as "inside" rather than "outside" so that NaN fails every check.
void require_closed(std::string_view name, float value, float lo, float hi) {
  if (!(value >= lo && value <= hi))
    md::fail("{} must be in [{}, {}], got {}", name, lo, hi, value);
}

}  // namespace

void SamplingParams::validate() const {
  // OpenAI caps temperature at 2; the engine accepts up to 100 so that the CLI and experiments can
  // flatten a distribution almost to uniform. Above that, logits/T lose all information and the
  // request is almost certainly a mistake. The server narrows this to OpenAI's range at its edge.
  require_closed("temperature", temperature, 0.0f, 100.0f);
  if (top_k < -1) md::fail("top_k must be >= 0 (0 or -1 = off), got {}", top_k);
  require_closed("top_p", top_p, 0.0f, 1.0f);
  require_closed("min_p", min_p, 0.0f, 1.0f);
  require_closed("presence_penalty", presence_penalty, -2.0f, 2.0f);
  require_closed("frequency_penalty", frequency_penalty, -2.0f, 2.0f);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    md::fail("repetition_penalty must be > 0 and finite, got {}", repetition_penalty);
  }
  if (logprobs_top_k < 0 || logprobs_top_k > 20) {
    md::fail("logprobs_top_k must be in [0, 20], got {}", logprobs_top_k);
  }
}

bool SamplingParams::greedy() const {
  // top_p 0 keeps the smallest set of tokens whose mass reaches 0: the top token alone (the API
  // contract's reading; OpenAI accepts 0).
  return temperature < kGreedyTemperature || top_k == 1 || top_p == 0.0f;
}

}  // namespace md::engine
