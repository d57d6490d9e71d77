#include "models/musespark/musespark_state.h"

#include <algorithm>

#include "base/error.h"

namespace md {

MuseSparkState::MuseSparkState(const MuseSparkConfig& config, int64_t capacity,
                               kernels::KvCacheType kv_type)
    : SequenceState(capacity) {
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const int64_t slots = config.is_full_attention(l)
                              ? capacity
                              : std::min(capacity, config.sliding_window + kMuseVerifyRows);
    layers_.emplace_back(slots, config.kv_dim(), kv_type);
  }
}

kernels::KvCache& MuseSparkState::kv_cache(int64_t slot) {
  fail("a Muse Spark sequence keeps its keys and values as rows, not blocks (slot {})", slot);
}

void MuseSparkState::commit(int64_t kept) {
  position_ -= verified_rows_ - kept;
  verified_rows_ = 0;
}

void MuseSparkState::reset() {
  position_ = 0;
  verified_rows_ = 0;
  for (kernels::KvRows& kv : layers_) kv.clear();
}

std::unique_ptr<SequenceState> MuseSparkState::clone() const {
  return std::make_unique<MuseSparkState>(*this);
}

std::size_t MuseSparkState::bytes() const {
  std::size_t total = 0;
  for (const kernels::KvRows& kv : layers_) total += kv.bytes();
  return total;
}

}  // namespace md
