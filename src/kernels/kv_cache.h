// The attention KV cache of one layer of one sequence, shared by every family: keys and values in
// bf16 (the default: half the memory) or f32 (for exactness tests), held in fixed-size blocks of
// kBlockPositions positions from a KvBlockPool. A block is taken when a position in it is first
// written, so memory follows the sequence's length, not its capacity; a copy (the n choices of one
// prompt) shares every block, and a block is copied only when one of its holders writes into it
// (copy on write). A block is one attention tile per head (kernels/attention.h): keys
// [kv heads][head_dim][kBlockPositions] (dimension-major), then values
// [kv heads][kBlockPositions][head_dim].
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_block_pool.h"

namespace md::kernels {

enum class KvCacheType { kBf16, kF32 };

class KvCache {
 public:
  static constexpr int64_t kBlockPositions = 16;
  static_assert(kBlockPositions == kAttentionTileKeys, "a block is one attention tile per head");

  KvCache() = default;
  KvCache(KvCacheType type, int64_t kv_heads, int64_t capacity, int64_t head_dim,
          KvBlockPool* pool = &KvBlockPool::shared());
  // A copy shares the source's blocks (no memory copied); either side's next write into a shared
  // block copies that one block first. Copies are taken between steps, never during one.
  KvCache(const KvCache& other);
  KvCache& operator=(const KvCache& other);
  KvCache(KvCache&& other) noexcept;
  KvCache& operator=(KvCache&& other) noexcept;
  ~KvCache();

  KvCacheType type() const { return type_; }
  int64_t capacity() const { return capacity_; }
  // Positions [0, written) have been written at least once.
  int64_t written() const { return written_.load(); }
  int64_t head_dim() const { return head_dim_; }
  // The memory of the blocks this cache holds (a block shared with a copy counts in both).
  std::size_t bytes() const;
  // Bytes of one block: kBlockPositions positions of every head, keys and values.
  std::size_t block_bytes() const;
  // Appends an identity of each block this cache holds (the same for every cache sharing the
  // block) with its bytes: memory shared between copies is counted once by whoever dedupes.
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const;

  // The f32 cache's elements as [kv heads][capacity][head_dim], zeros where never written (empty
  // for a bf16 cache): for exactness tests.
  std::vector<float> keys_f32() const { return dense_f32(false); }
  std::vector<float> values_f32() const { return dense_f32(true); }

  // Forgets every position: they read as zeros again (as in a new cache), and the blocks go back
  // to the pool. Not while a step runs.
  void release();
  // Lets go of the blocks wholly at or past `position` (a sequence going back to it); the block
  // holding `position` keeps its later entries until they are written again. Not while a step
  // runs.
  void truncate(int64_t position);

  // Stores the key and value of KV head `head` at `position` (rounded to bf16 in a bf16 cache).
  // Tasks of one step may write different heads (and positions) at once.
  void write(int64_t head, int64_t position, const float* key, const float* value);
  // Softmax attention of q over positions [0, n_keys) of KV head `head` (kernels/attention.h).
  void attend(int64_t head, int64_t n_keys, const float* q, float scale, float* out) const;
  // The same for many queries of the head at once (a prefill chunk's rows, in position order):
  // each query's result is bitwise what the call above gives it alone.
  void attend(int64_t head, std::span<const AttentionQuery> queries, float scale) const;

 private:
  // A block, the number of caches whose table holds it, and the one cache that holds it alone
  // and so writes it without the lock (null while it is shared; a copy clears it between steps,
  // and nothing shares a block during a step).
  struct Block {
    std::atomic<int32_t> holders{1};
    std::atomic<const KvCache*> owner{nullptr};
    void* data = nullptr;
  };

  std::size_t element_bytes() const { return type_ == KvCacheType::kF32 ? 4 : 2; }
  int64_t block_count() const { return (capacity_ + kBlockPositions - 1) / kBlockPositions; }
  // Elements from a block's start to element 0 of head `head`'s key (its next elements are
  // kBlockPositions apart) or value (contiguous) at `slot`.
  std::size_t key_offset(int64_t head, int64_t slot) const {
    return static_cast<std::size_t>(head * kBlockPositions * head_dim_ + slot);
  }
  std::size_t value_offset(int64_t head, int64_t slot) const {
    return static_cast<std::size_t>(((kv_heads_ + head) * kBlockPositions + slot) * head_dim_);
  }
  // The block of `position`, held by this cache alone: at once if it is this cache's own, else
  // decided under the lock (taken, claimed or copied).
  Block& writable_block(int64_t position);
  Block* new_block() const;
  void drop(Block* block) const;
  void drop_all();
  std::vector<float> dense_f32(bool values) const;
  void swap(KvCache& other) noexcept;

  KvCacheType type_ = KvCacheType::kBf16;
  int64_t kv_heads_ = 0;
  int64_t capacity_ = 0;
  int64_t head_dim_ = 0;
  KvBlockPool* pool_ = nullptr;
  // One entry per kBlockPositions positions; null until a position in it is written. Atomic: a
  // write swaps in a new block while other tasks of the step read the table.
  std::unique_ptr<std::atomic<Block*>[]> blocks_;
  // Serialises taking and copying blocks (the slow path of a write).
  std::unique_ptr<std::mutex> taking_;
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
    void lower_to(int64_t n) { value.store(n, std::memory_order_relaxed); }
  };
  HighWater written_;
};

}  // namespace md::kernels
