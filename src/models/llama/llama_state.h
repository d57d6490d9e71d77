// The state of one Llama sequence: an f32 KV cache per layer, [kv heads][capacity][head_dim]
// (written by the reference forward and by the step program alike).
#pragma once

#include <memory>
#include <vector>

#include "base/zeroed_array.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"

namespace md {

class LlamaState final : public SequenceState {
 public:
  LlamaState(const LlamaConfig& c, int64_t capacity) : SequenceState(capacity) {
    auto n = static_cast<std::size_t>(c.kv_dim() * capacity);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      keys.emplace_back(n);
      values.emplace_back(n);
    }
  }
  void reset() override { position_ = 0; }
  std::unique_ptr<SequenceState> clone() const override {
    return std::make_unique<LlamaState>(*this);
  }
  std::size_t bytes() const override {
    return keys.size() * 2 * (keys.empty() ? 0 : keys[0].bytes());
  }
  void advance(int64_t n) { position_ += n; }

  std::vector<ZeroedArray<float>> keys, values;
};

}  // namespace md
