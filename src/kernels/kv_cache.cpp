#include "kernels/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/dtype.h"
#include "kernels/attention.h"

namespace md::kernels {

KvCache::KvCache(KvCacheType type, int64_t kv_heads, int64_t capacity, int64_t head_dim,
                 KvBlockPool* pool)
    : type_(type),
      kv_heads_(kv_heads),
      capacity_(capacity),
      head_dim_(head_dim),
      pool_(pool),
      blocks_(std::make_unique<std::atomic<Block*>[]>(static_cast<std::size_t>(block_count()))),
      taking_(std::make_unique<std::mutex>()) {}

KvCache::KvCache(const KvCache& other)
    : KvCache(other.type_, other.kv_heads_, other.capacity_, other.head_dim_, other.pool_) {
  written_ = other.written_;
  for (int64_t b = 0; b < block_count(); ++b) {
    Block* block = other.blocks_[b].load(std::memory_order_acquire);
    if (block == nullptr) continue;
    block->holders.fetch_add(1, std::memory_order_relaxed);
    block->owner.store(nullptr, std::memory_order_relaxed);
    blocks_[b].store(block, std::memory_order_relaxed);
  }
}

KvCache& KvCache::operator=(const KvCache& other) {
  if (this != &other) *this = KvCache(other);
  return *this;
}

KvCache::KvCache(KvCache&& other) noexcept {
  swap(other);
}

// The blocks this cache held go with `gone`.
KvCache& KvCache::operator=(KvCache&& other) noexcept {
  KvCache gone(std::move(other));
  swap(gone);
  return *this;
}

void KvCache::swap(KvCache& other) noexcept {
  std::swap(type_, other.type_);
  std::swap(kv_heads_, other.kv_heads_);
  std::swap(capacity_, other.capacity_);
  std::swap(head_dim_, other.head_dim_);
  std::swap(pool_, other.pool_);
  std::swap(blocks_, other.blocks_);
  std::swap(taking_, other.taking_);
  const HighWater written = written_;
  written_ = other.written_;
  other.written_ = written;
}

KvCache::~KvCache() {
  drop_all();
}

std::size_t KvCache::block_bytes() const {
  return static_cast<std::size_t>(2 * kv_heads_ * kBlockPositions * head_dim_) * element_bytes();
}

std::size_t KvCache::bytes() const {
  std::size_t held = 0;
  for (int64_t b = 0; b < block_count(); ++b) {
    if (blocks_[b].load(std::memory_order_relaxed) != nullptr) held += block_bytes();
  }
  return held;
}

void KvCache::append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const {
  for (int64_t b = 0; b < block_count(); ++b) {
    if (const Block* block = blocks_[b].load(std::memory_order_relaxed)) {
      out.emplace_back(block, block_bytes());
    }
  }
}

void KvCache::truncate(int64_t position) {
  const int64_t kept = (std::max<int64_t>(position, 0) + kBlockPositions - 1) / kBlockPositions;
  for (int64_t b = kept; b < block_count(); ++b) {
    drop(blocks_[b].exchange(nullptr, std::memory_order_acq_rel));
  }
  written_.lower_to(std::min(written_.load(), kept * kBlockPositions));
}

KvCache::Block* KvCache::new_block() const {
  auto block = std::make_unique<Block>();
  block->data = pool_->allocate(block_bytes());
  return block.release();
}

// The last holder gives the block back to the pool.
void KvCache::drop(Block* block) const {
  if (block == nullptr || block->holders.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  pool_->free(block->data, block_bytes());
  delete block;
}

void KvCache::drop_all() {
  for (int64_t b = 0; b < block_count(); ++b) {
    drop(blocks_[b].exchange(nullptr, std::memory_order_acq_rel));
  }
}

void KvCache::release() {
  drop_all();
  written_ = HighWater{};
}

KvCache::Block& KvCache::writable_block(int64_t position) {
  std::atomic<Block*>& slot = blocks_[position / kBlockPositions];
  Block* block = slot.load(std::memory_order_acquire);
  if (block != nullptr && block->owner.load(std::memory_order_acquire) == this) return *block;
  // Decided under the lock only: another head of this step may be copying this very block, and
  // its other holder may let go of it at any moment (its holder count falls during a step).
  std::lock_guard lock(*taking_);
  block = slot.load(std::memory_order_acquire);
  if (block != nullptr && block->holders.load(std::memory_order_acquire) == 1) {
    block->owner.store(this, std::memory_order_release);  // the other holders have let go
    return *block;
  }
  Block* own = new_block();
  if (block != nullptr) std::memcpy(own->data, block->data, block_bytes());
  own->owner.store(this, std::memory_order_relaxed);
  slot.store(own, std::memory_order_release);
  // Dropped only after the copy: the other holder writes into it once it holds it alone.
  drop(block);
  return *own;
}

void KvCache::write(int64_t head, int64_t position, const float* key, const float* value) {
  written_.raise_to(position + 1);
  Block& block = writable_block(position);
  const int64_t slot = position % kBlockPositions;
  const std::size_t k_at = key_offset(head, slot);
  const std::size_t v_at = value_offset(head, slot);
  auto store = [&]<typename T>(T* data, auto convert) {
    for (int64_t d = 0; d < head_dim_; ++d) {
      data[k_at + static_cast<std::size_t>(d * kBlockPositions)] = convert(key[d]);
      data[v_at + static_cast<std::size_t>(d)] = convert(value[d]);
    }
  };
  if (type_ == KvCacheType::kF32) {
    store(static_cast<float*>(block.data), [](float x) { return x; });
  } else {
    store(static_cast<uint16_t*>(block.data), [](float x) { return f32_to_bf16(x); });
  }
}

namespace {

// Where each block's tiles of one head start, keys and values; reused per thread (attention runs
// in every task of every step, and a long context has thousands of blocks).
template <typename T>
struct HeadBlocks {
  std::vector<const T*> keys, values;
};
template <typename T>
HeadBlocks<T>& head_blocks(std::size_t count) {
  thread_local HeadBlocks<T> blocks;
  blocks.keys.resize(count);
  blocks.values.resize(count);
  return blocks;
}

template <typename T>
const T* zero_block(std::size_t elements) {
  thread_local std::vector<T> zeros;
  if (zeros.size() < elements) zeros.resize(elements);
  return zeros.data();
}

}  // namespace

void KvCache::attend(int64_t head, std::span<const AttentionQuery> queries, float scale) const {
  int64_t longest = 0;
  for (const AttentionQuery& q : queries) longest = std::max(longest, q.n_keys);
  auto run = [&]<typename T>(T) {
    const auto count = static_cast<std::size_t>((longest + kBlockPositions - 1) / kBlockPositions);
    HeadBlocks<T>& blocks = head_blocks<T>(count);
    for (std::size_t b = 0; b < count; ++b) {
      // Positions never written read as zeros, as in a new cache.
      const Block* block = blocks_[b].load(std::memory_order_acquire);
      const auto* data = block != nullptr ? static_cast<const T*>(block->data)
                                          : zero_block<T>(block_bytes() / sizeof(T));
      blocks.keys[b] = data + key_offset(head, 0);
      blocks.values[b] = data + value_offset(head, 0);
    }
    attend_tiles(queries, KeyValueTiles<T>{blocks.keys.data(), blocks.values.data()}, head_dim_,
                 scale);
  };
  if (type_ == KvCacheType::kF32) {
    run(float{});
  } else {
    run(uint16_t{});
  }
}

void KvCache::attend(int64_t head, int64_t n_keys, const float* q, float scale, float* out) const {
  const AttentionQuery query{q, n_keys, out};
  attend(head, {&query, 1}, scale);
}

std::vector<float> KvCache::dense_f32(bool values) const {
  if (type_ != KvCacheType::kF32) return {};
  std::vector<float> dense(static_cast<std::size_t>(kv_heads_ * capacity_ * head_dim_));
  for (int64_t b = 0; b < block_count(); ++b) {
    const Block* block = blocks_[b].load(std::memory_order_acquire);
    if (block == nullptr) continue;
    const auto* data = static_cast<const float*>(block->data);
    const int64_t rows = std::min(kBlockPositions, capacity_ - b * kBlockPositions);
    for (int64_t h = 0; h < kv_heads_; ++h) {
      for (int64_t slot = 0; slot < rows; ++slot) {
        float* to = dense.data() + (h * capacity_ + b * kBlockPositions + slot) * head_dim_;
        for (int64_t d = 0; d < head_dim_; ++d) {
          to[d] = values
                      ? data[value_offset(h, slot) + static_cast<std::size_t>(d)]
                      : data[key_offset(h, slot) + static_cast<std::size_t>(d * kBlockPositions)];
        }
      }
    }
  }
  return dense;
}

}  // namespace md::kernels
