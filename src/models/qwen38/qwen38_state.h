// Per-sequence state of a Qwen3.8 model (spec §9): a KV cache per attention layer and, per Gated
// DeltaNet layer, the conv state (last kernel-1 raw inputs) and the f32 recurrent state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/zeroed_array.h"
#include "kernels/kv_cache.h"
#include "models/language_model.h"
#include "models/qwen38/qwen38_config.h"
#include "program/program.h"

namespace md {

struct Qwen38GdnState {
  ZeroedArray<float> conv;       // [conv_dim][kernel - 1], oldest first
  ZeroedArray<float> recurrent;  // [value heads][value dim][key dim]
};

class Qwen38State final : public SequenceState, public program::StepState {
 public:
  Qwen38State(const Qwen38Config& config, int64_t capacity, KvCacheType kv_type);

  void reset() override;
  std::unique_ptr<SequenceState> clone() const override;
  std::size_t bytes() const override;
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const override {
    for (const kernels::KvCache& cache : kv_) cache.append_blocks(out);
  }

  KvCacheType kv_type() const { return kv_type_; }
  kernels::KvCache& kv(int64_t attention_ordinal) {
    return kv_[static_cast<std::size_t>(attention_ordinal)];
  }
  kernels::KvCache& kv_cache(int64_t attention_ordinal) override { return kv(attention_ordinal); }
  const kernels::KvCache& kv(int64_t attention_ordinal) const {
    return kv_[static_cast<std::size_t>(attention_ordinal)];
  }
  Qwen38GdnState& gdn(int64_t gdn_ordinal) { return gdn_[static_cast<std::size_t>(gdn_ordinal)]; }
  const Qwen38GdnState& gdn(int64_t gdn_ordinal) const {
    return gdn_[static_cast<std::size_t>(gdn_ordinal)];
  }
  program::RecurrentState recurrent_state(int64_t gdn_ordinal) override {
    Qwen38GdnState& state = gdn(gdn_ordinal);
    return {state.conv.data(), state.recurrent.data()};
  }
  void advance(int64_t tokens) { position_ += tokens; }
  void set_position(int64_t position) { position_ = position; }

  static std::size_t bytes_per_token(const Qwen38Config& config, KvCacheType kv_type);
  static std::size_t fixed_bytes(const Qwen38Config& config);

 private:
  KvCacheType kv_type_;
  std::vector<kernels::KvCache> kv_;
  std::vector<Qwen38GdnState> gdn_;
};

}  // namespace md
