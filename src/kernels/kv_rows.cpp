#include "kernels/kv_rows.h"

#include <algorithm>

#include "base/dtype.h"

namespace md::kernels {

namespace {

// Grows `v` to hold `needed` elements, doubling (a full layer's storage grows with the context,
// so its copies stay linear in it), never past `limit`.
template <typename T>
void grow(std::vector<T>& v, std::size_t needed, std::size_t limit) {
  if (v.size() >= needed) return;
  v.resize(std::min(std::max(needed, v.size() * 2), limit));
}

}  // namespace

void KvRows::reserve(int64_t position) {
  const auto needed = static_cast<std::size_t>(std::min(position + 1, slots_) * width_);
  const auto limit = static_cast<std::size_t>(slots_ * width_);
  if (type_ == KvCacheType::kBf16) {
    grow(keys_bf16_, needed, limit);
    grow(values_bf16_, needed, limit);
  } else {
    grow(keys_f32_, needed, limit);
    grow(values_f32_, needed, limit);
  }
}

void KvRows::write(int64_t position, const float* key, const float* value) {
  reserve(position);
  write_part(position, 0, width_, key, value);
}

void KvRows::write_part(int64_t position, int64_t offset, int64_t n, const float* key,
                        const float* value) {
  const auto at = static_cast<std::ptrdiff_t>(slot(position) * width_ + offset);
  if (type_ == KvCacheType::kF32) {
    std::copy(key, key + n, keys_f32_.begin() + at);
    std::copy(value, value + n, values_f32_.begin() + at);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    keys_bf16_[static_cast<std::size_t>(at + i)] = f32_to_bf16(key[i]);
    values_bf16_[static_cast<std::size_t>(at + i)] = f32_to_bf16(value[i]);
  }
}

const float* KvRows::read(const std::vector<float>& f32, const std::vector<uint16_t>& bf16,
                          int64_t position, int64_t offset, int64_t n, float* scratch) const {
  const auto at = static_cast<std::size_t>(slot(position) * width_ + offset);
  if (type_ == KvCacheType::kF32) return f32.data() + at;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    scratch[i] = bf16_to_f32(bf16[at + i]);
  return scratch;
}

void KvRows::gather(int64_t offset, int64_t n, int64_t first, int64_t last, float* keys,
                    float* values) const {
  for (int64_t j = 0; j <= last - first; ++j) {
    float* key = keys + j * n;
    float* value = values + j * n;
    const float* k = this->key(first + j, offset, n, key);
    const float* v = this->value(first + j, offset, n, value);
    if (k != key) std::copy(k, k + n, key);
    if (v != value) std::copy(v, v + n, value);
  }
}

std::size_t KvRows::bytes() const {
  return (keys_f32_.capacity() + values_f32_.capacity()) * sizeof(float) +
         (keys_bf16_.capacity() + values_bf16_.capacity()) * sizeof(uint16_t);
}

void KvRows::clear() {
  keys_f32_ = {};
  values_f32_ = {};
  keys_bf16_ = {};
  values_bf16_ = {};
}

}  // namespace md::kernels
