#include "kernels/kv_cache.h"

#include <algorithm>

#include "base/dtype.h"
#include "kernels/attention.h"

namespace md::kernels {

KvCache::KvCache(KvCacheType type, int64_t kv_heads, int64_t capacity, int64_t head_dim)
    : type_(type), kv_heads_(kv_heads), capacity_(capacity), head_dim_(head_dim) {
  auto elements = static_cast<std::size_t>(kv_heads * capacity * head_dim);
  if (type == KvCacheType::kBf16) {
    k_bf16_ = ZeroedArray<uint16_t>(elements);
    v_bf16_ = ZeroedArray<uint16_t>(elements);
  } else {
    k_f32_ = ZeroedArray<float>(elements);
    v_f32_ = ZeroedArray<float>(elements);
  }
}

KvCache::KvCache(const KvCache& other)
    : KvCache(other.type_, other.kv_heads_, other.capacity_, other.head_dim_) {
  written_ = other.written_;
  const int64_t written = written_.load();
  auto copy_heads = [&](const auto& from, auto& to) {
    if (from.size() == 0) return;
    const auto rows = static_cast<std::size_t>(written * head_dim_);
    for (int64_t h = 0; h < kv_heads_; ++h) {
      std::copy_n(from.data() + offset(h, 0), rows, to.data() + offset(h, 0));
    }
  };
  copy_heads(other.k_bf16_, k_bf16_);
  copy_heads(other.v_bf16_, v_bf16_);
  copy_heads(other.k_f32_, k_f32_);
  copy_heads(other.v_f32_, v_f32_);
}

KvCache& KvCache::operator=(const KvCache& other) {
  if (this != &other) *this = KvCache(other);
  return *this;
}

void KvCache::release() {
  const auto written = static_cast<std::size_t>(written_.load() * head_dim_);
  auto release_heads = [&](auto& array) {
    if (array.size() == 0) return;
    for (int64_t h = 0; h < kv_heads_; ++h) {
      array.release(offset(h, 0), offset(h, 0) + written);
    }
  };
  release_heads(k_bf16_);
  release_heads(v_bf16_);
  release_heads(k_f32_);
  release_heads(v_f32_);
  written_ = HighWater{};
}

void KvCache::write(int64_t head, int64_t position, const float* key, const float* value) {
  written_.raise_to(position + 1);
  std::size_t at = offset(head, position);
  if (type_ == KvCacheType::kF32) {
    std::copy(key, key + head_dim_, k_f32_.data() + at);
    std::copy(value, value + head_dim_, v_f32_.data() + at);
    return;
  }
  for (int64_t d = 0; d < head_dim_; ++d) {
    k_bf16_[at + static_cast<std::size_t>(d)] = f32_to_bf16(key[d]);
    v_bf16_[at + static_cast<std::size_t>(d)] = f32_to_bf16(value[d]);
  }
}

void KvCache::attend(int64_t head, int64_t n_keys, const float* q, float scale, float* scores,
                     float* out) const {
  std::size_t at = offset(head, 0);
  if (type_ == KvCacheType::kF32) {
    kernels::attend(q, k_f32_.data() + at, v_f32_.data() + at, n_keys, head_dim_, head_dim_, scale,
                    scores, out);
  } else {
    kernels::attend(q, k_bf16_.data() + at, v_bf16_.data() + at, n_keys, head_dim_, head_dim_,
                    scale, scores, out);
  }
}

}  // namespace md::kernels
