// The `model.safetensors.index.json` of a sharded checkpoint: which shard file holds each tensor.
// Parsed from text so tests and fuzzers need no files; shard names are checked to stay inside the
// checkpoint directory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace md {

inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

struct SafetensorsIndex {
  std::vector<std::string> shards;  // distinct shard names, sorted
  // Tensor name → position in `shards`, sorted by tensor name.
  std::vector<std::pair<std::string, std::size_t>> weight_map;
};

// Parses an index: a JSON object with a non-empty "weight_map" object of tensor name → shard file
// name (other top-level keys such as "metadata" are ignored). Duplicate tensor names are an error.
// Each shard name must be a relative path whose components are neither empty, "." nor "..", with
// no control characters, so that it cannot point outside the directory holding the index.
// Throws md::Error naming `origin`.
SafetensorsIndex parse_safetensors_index(std::string_view text, std::string_view origin);

// The lexical rule above, exposed for tests; returns what is wrong, or an empty string.
std::string shard_name_problem(std::string_view name);

}  // namespace md
