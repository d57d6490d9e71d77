// The state of one Llama sequence: a KV cache per layer (f32: the goldens' exactness holds with
// it; kernels/kv_cache.h), written by the reference forward and by the step program alike.
#pragma once

#include <memory>
#include <vector>

#include "kernels/kv_cache.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"
#include "program/program.h"

namespace md {

class LlamaState final : public SequenceState, public program::StepState {
 public:
  LlamaState(const LlamaConfig& c, int64_t capacity) : SequenceState(capacity) {
    for (int64_t i = 0; i < c.num_layers; ++i) {
      kv.emplace_back(kernels::KvCacheType::kF32, c.num_key_value_heads, capacity, c.head_dim);
    }
  }
  // The KV memory of a finished sequence goes back to the system (kernels/kv_cache.h).
  void reset() override {
    for (kernels::KvCache& cache : kv) cache.release();
    position_ = 0;
  }
  std::unique_ptr<SequenceState> clone() const override {
    return std::make_unique<LlamaState>(*this);
  }
  std::size_t bytes() const override {
    std::size_t total = 0;
    for (const kernels::KvCache& cache : kv) total += cache.bytes();
    return total;
  }
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const override {
    for (const kernels::KvCache& cache : kv) cache.append_blocks(out);
  }
  kernels::KvCache& kv_cache(int64_t layer) override { return kv[static_cast<std::size_t>(layer)]; }
  void advance(int64_t n) { position_ += n; }
  // Positions >= `position` are forgotten: the next token goes there, the blocks past it are let
  // go, and a block this state shares is copied before it is written (kernels::KvCache), so a
  // copy keeps what it had.
  void rewind(int64_t position) {
    for (kernels::KvCache& cache : kv) cache.truncate(position);
    position_ = position;
  }

  std::vector<kernels::KvCache> kv;  // per layer
};

}  // namespace md
