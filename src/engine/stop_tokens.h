// Token ids that end a generation: the request's stop_token_ids always, the model's end-of-sequence
// ids unless the request sets ignore_eos (vLLM semantics).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace md::engine {

struct StopTokens {
  std::vector<int32_t> ids;      // stop whatever ignore_eos says (request stop_token_ids)
  std::vector<int32_t> eos_ids;  // the model's end-of-sequence ids
  bool ignore_eos = false;

  bool is_stop(int32_t token) const {
    auto contains = [token](const std::vector<int32_t>& v) {
      return std::find(v.begin(), v.end(), token) != v.end();
    };
    return contains(ids) || (!ignore_eos && contains(eos_ids));
  }
};

}  // namespace md::engine
