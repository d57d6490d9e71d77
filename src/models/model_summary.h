// What `megadecode info` says about a model from its config alone: architecture, layer table,
// parameters and bytes per kind of weight, bytes moved per decoded token, and memory needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/common/config_footprint.h"
#include "models/model_config.h"

namespace md {

struct SummaryOptions {
  int64_t context = 0;    // positions per sequence; 0 = min(max context, 32768)
  int64_t sequences = 1;  // sequences held at once (batch slots)
  FootprintOptions footprint;
};

struct ModelSummary {
  ModelFamily family = ModelFamily::kLlama;
  ConfigFootprint footprint;
  int64_t context = 0;
  int64_t sequences = 1;

  int64_t total_params = 0;
  // Parameters one decoded token uses: all dense ones, the active experts, one embedding row.
  int64_t active_params = 0;
  int64_t weight_bytes = 0;
  // Batch 1, decoding with `context` positions in the cache: dense weights, lm_head, the active
  // experts and one embedding row are read; caches are read over the attended positions;
  // recurrent/conv state is read and rewritten and one cache row is written.
  int64_t weight_bytes_read_per_token = 0;
  int64_t state_bytes_read_per_token = 0;
  int64_t state_bytes_written_per_token = 0;
  int64_t state_bytes_per_sequence = 0;
  int64_t memory_bytes = 0;  // weights + sequences x state

  int64_t bytes_per_token() const {
    return weight_bytes_read_per_token + state_bytes_read_per_token + state_bytes_written_per_token;
  }
};

ModelSummary summarize_model(const ModelConfig& config, const SummaryOptions& options = {});
// The same from a footprint already made (a GGUF file's, counted from its tensors).
ModelSummary summarize_footprint(ModelFamily family, ConfigFootprint footprint,
                                 const SummaryOptions& options);
std::string format_model_summary(const ModelSummary& summary);

// "1.50 GiB", "64.00 KiB", "512 B".
std::string format_bytes(int64_t bytes);
// "26.90 G", "383.27 M", "5.12 K", "42".
std::string format_count(int64_t count);
// Compact layer list: "3, 7, ..., 63 (every 4)", "0-2, 4-6, ..., 60-62".
std::string describe_layers(const std::vector<int64_t>& layers);

}  // namespace md
