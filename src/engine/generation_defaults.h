// Sampling defaults a model ships in generation_config.json (temperature, top_k, top_p, min_p,
// repetition_penalty, do_sample), applied under whatever the user sets explicitly, as
// transformers and vLLM do.
#pragma once

#include <optional>
#include <string>

#include "engine/sampling_params.h"

namespace md::engine {

struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  bool greedy = false;  // do_sample: false

  // True when the model said nothing about sampling (no file, or none of these keys).
  bool empty() const {
    return !temperature && !top_k && !top_p && !min_p && !repetition_penalty && !greedy;
  }
};

// Reads `directory`/generation_config.json; absent file or keys leave fields unset. A malformed
// file is an md::Error naming it.
GenerationDefaults read_generation_defaults(const std::string& directory);

// The model's defaults, then the engine's (temperature 1, no truncation).
SamplingParams default_sampling(const GenerationDefaults& defaults);

}  // namespace md::engine
