#include "models/musespark/musespark_state.h"

#include <algorithm>

#include "base/dtype.h"

namespace md {

namespace {

// Grows `v` to hold `needed` elements, doubling (a full layer's storage grows with the context,
// so its copies stay linear in it), never past `limit`.
template <typename T>
void grow(std::vector<T>& v, std::size_t needed, std::size_t limit) {
  if (v.size() >= needed) return;
  v.resize(std::min(std::max(needed, v.size() * 2), limit));
}

}  // namespace

void MuseLayerKv::reserve(int64_t position) {
  const auto needed = static_cast<std::size_t>(std::min(position + 1, slots_) * width_);
  const auto limit = static_cast<std::size_t>(slots_ * width_);
  if (type_ == kernels::KvCacheType::kBf16) {
    grow(keys_bf16_, needed, limit);
    grow(values_bf16_, needed, limit);
  } else {
    grow(keys_f32_, needed, limit);
    grow(values_f32_, needed, limit);
  }
}

void MuseLayerKv::write(int64_t position, const float* key, const float* value) {
  reserve(position);
  const auto at = static_cast<std::ptrdiff_t>(slot(position) * width_);
  if (type_ == kernels::KvCacheType::kF32) {
    std::copy(key, key + width_, keys_f32_.begin() + at);
    std::copy(value, value + width_, values_f32_.begin() + at);
    return;
  }
  for (int64_t i = 0; i < width_; ++i) {
    keys_bf16_[static_cast<std::size_t>(at + i)] = f32_to_bf16(key[i]);
    values_bf16_[static_cast<std::size_t>(at + i)] = f32_to_bf16(value[i]);
  }
}

const float* MuseLayerKv::read(const std::vector<float>& f32, const std::vector<uint16_t>& bf16,
                               int64_t position, int64_t offset, int64_t n, float* scratch) const {
  const auto at = static_cast<std::size_t>(slot(position) * width_ + offset);
  if (type_ == kernels::KvCacheType::kF32) return f32.data() + at;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    scratch[i] = bf16_to_f32(bf16[at + i]);
  return scratch;
}

std::size_t MuseLayerKv::bytes() const {
  return (keys_f32_.capacity() + values_f32_.capacity()) * sizeof(float) +
         (keys_bf16_.capacity() + values_bf16_.capacity()) * sizeof(uint16_t);
}

void MuseLayerKv::clear() {
  keys_f32_ = {};
  values_f32_ = {};
  keys_bf16_ = {};
  values_bf16_ = {};
}

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

void MuseSparkState::commit(int64_t kept) {
  position_ -= verified_rows_ - kept;
  verified_rows_ = 0;
}

void MuseSparkState::reset() {
  position_ = 0;
  verified_rows_ = 0;
  for (MuseLayerKv& kv : layers_) kv.clear();
}

std::unique_ptr<SequenceState> MuseSparkState::clone() const {
  return std::make_unique<MuseSparkState>(*this);
}

std::size_t MuseSparkState::bytes() const {
  std::size_t total = 0;
  for (const MuseLayerKv& kv : layers_) total += kv.bytes();
  return total;
}

}  // namespace md
