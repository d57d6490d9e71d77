// The attention KV cache of one layer of one sequence, shared by every family: keys and values
// as [kv heads][capacity][head_dim], in bf16 (the default: half the memory) or f32 (for
// exactness tests). Slot = position.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/zeroed_array.h"

namespace md::kernels {

enum class KvCacheType { kBf16, kF32 };

class KvCache {
 public:
  KvCache() = default;
  KvCache(KvCacheType type, int64_t kv_heads, int64_t capacity, int64_t head_dim);
  // A copy holds the same values everywhere but copies only the positions ever written: the rest
  // are zeros in both, and left untouched they cost no memory, so a clone of a short sequence
  // (the n choices of one prompt) stays small whatever the capacity.
  KvCache(const KvCache& other);
  KvCache& operator=(const KvCache& other);
  KvCache(KvCache&& other) noexcept = default;
  KvCache& operator=(KvCache&& other) noexcept = default;

  KvCacheType type() const { return type_; }
  int64_t capacity() const { return capacity_; }
  // Positions [0, written) have been written at least once.
  int64_t written() const { return written_.load(); }
  int64_t head_dim() const { return head_dim_; }
  std::size_t bytes() const {
    return k_bf16_.bytes() + v_bf16_.bytes() + k_f32_.bytes() + v_f32_.bytes();
  }

  // The f32 cache's elements as stored (empty for a bf16 cache), for exactness tests.
  const ZeroedArray<float>& keys_f32() const { return k_f32_; }
  const ZeroedArray<float>& values_f32() const { return v_f32_; }

  // Forgets every position: they read as zeros again (as in a new cache), and their memory goes
  // back to the system. Not while a step runs.
  void release();

  // Stores the key and value of KV head `head` at `position` (rounded to bf16 in a bf16 cache).
  void write(int64_t head, int64_t position, const float* key, const float* value);
  // Softmax attention of q over positions [0, n_keys) of KV head `head`; `scores` holds n_keys.
  void attend(int64_t head, int64_t n_keys, const float* q, float scale, float* scores,
              float* out) const;

 private:
  std::size_t offset(int64_t head, int64_t position) const {
    return static_cast<std::size_t>((head * capacity_ + position) * head_dim_);
  }

  KvCacheType type_ = KvCacheType::kBf16;
  int64_t kv_heads_ = 0;
  int64_t capacity_ = 0;
  int64_t head_dim_ = 0;
  // The positions ever written. Tasks of one step write different heads of the same position at
  // once: atomic, relaxed (a copy is only taken between steps); copied by value.
  struct HighWater {
    std::atomic<int64_t> value{0};
    HighWater() = default;
    HighWater(const HighWater& other) noexcept : value(other.load()) {}
    HighWater& operator=(const HighWater& other) noexcept {
      value.store(other.load(), std::memory_order_relaxed);
      return *this;
    }
    int64_t load() const { return value.load(std::memory_order_relaxed); }
    void raise_to(int64_t n) {
      for (int64_t seen = load();
           seen < n && !value.compare_exchange_weak(seen, n, std::memory_order_relaxed);) {
      }
    }
  };
  HighWater written_;
  ZeroedArray<uint16_t> k_bf16_, v_bf16_;
  ZeroedArray<float> k_f32_, v_f32_;
};

}  // namespace md::kernels
