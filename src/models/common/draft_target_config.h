// The facts about a target model that a speculative drafter's config must agree with; families
// export them so drafters can be checked without including a family.
#pragma once

#include <cstdint>
#include <string>

namespace md {

struct DraftTarget {
  std::string model;  // "qwen3_5", for messages
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
};

}  // namespace md
