#include "models/qwen38/qwen38_state.h"

#include <algorithm>

#include "base/dtype.h"
#include "kernels/attention.h"

namespace md {

Qwen38State::Qwen38State(const Qwen38Config& config, int64_t capacity, KvCacheType kv_type)
    : SequenceState(capacity), kv_type_(kv_type) {
  for (int64_t i = 0; i < config.num_full_attention_layers(); ++i) {
    kv_.emplace_back(kv_type, config.num_key_value_heads, capacity, config.head_dim);
  }
  auto conv = static_cast<std::size_t>(config.conv_dim() * (config.linear_conv_kernel - 1));
  auto recurrent = static_cast<std::size_t>(
      config.linear_num_value_heads * config.linear_value_head_dim * config.linear_key_head_dim);
  for (int64_t i = 0; i < config.num_linear_attention_layers(); ++i) {
    gdn_.push_back({ZeroedArray<float>(conv), ZeroedArray<float>(recurrent)});
  }
}

void Qwen38State::reset() {
  // KV slots at or beyond the position are never read; their memory goes back to the system.
  for (kernels::KvCache& cache : kv_) cache.release();
  for (Qwen38GdnState& state : gdn_) {
    state.conv.zero();
    state.recurrent.zero();
  }
  position_ = 0;
}

std::unique_ptr<SequenceState> Qwen38State::clone() const {
  return std::make_unique<Qwen38State>(*this);
}

std::size_t Qwen38State::bytes() const {
  std::size_t total = 0;
  for (const kernels::KvCache& cache : kv_) {
    total += cache.bytes();
  }
  for (const Qwen38GdnState& state : gdn_) total += state.conv.bytes() + state.recurrent.bytes();
  return total;
}

std::size_t Qwen38State::bytes_per_token(const Qwen38Config& config, KvCacheType kv_type) {
  std::size_t element = kv_type == KvCacheType::kBf16 ? 2 : 4;
  return static_cast<std::size_t>(2 * config.num_full_attention_layers() * config.kv_dim()) *
         element;
}

std::size_t Qwen38State::fixed_bytes(const Qwen38Config& config) {
  auto per_layer = static_cast<std::size_t>(
      config.conv_dim() * (config.linear_conv_kernel - 1) +
      config.linear_num_value_heads * config.linear_value_head_dim * config.linear_key_head_dim);
  return per_layer * sizeof(float) * static_cast<std::size_t>(config.num_linear_attention_layers());
}

}  // namespace md
