#include "models/musespark/musespark_state.h"

#include <algorithm>

namespace md {

void MuseLayerKv::reserve(int64_t position) {
  const auto needed = static_cast<std::size_t>(std::min(position + 1, slots) * width);
  if (keys.size() >= needed) return;
  // Doubling keeps the copies of a growing full layer linear in the context.
  const std::size_t grown =
      std::min(std::max(needed, keys.size() * 2), static_cast<std::size_t>(slots * width));
  keys.resize(grown);
  values.resize(grown);
}

MuseSparkState::MuseSparkState(const MuseSparkConfig& config, int64_t capacity,
                               kernels::KvCacheType kv_type)
    : SequenceState(capacity), kv_type_(kv_type) {
  for (int64_t l = 0; l < config.num_layers; ++l) {
    MuseLayerKv kv;
    kv.slots = config.is_full_attention(l) ? capacity : std::min(capacity, config.sliding_window);
    kv.width = config.kv_dim();
    layers_.push_back(std::move(kv));
  }
}

void MuseSparkState::reset() {
  position_ = 0;
  for (MuseLayerKv& kv : layers_) {
    kv.keys = {};
    kv.values = {};
  }
}

std::unique_ptr<SequenceState> MuseSparkState::clone() const {
  return std::make_unique<MuseSparkState>(*this);
}

std::size_t MuseSparkState::bytes() const {
  std::size_t total = 0;
  for (const MuseLayerKv& kv : layers_) {
    total += (kv.keys.capacity() + kv.values.capacity()) * sizeof(float);
  }
  return total;
}

}  // namespace md
