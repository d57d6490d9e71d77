#include "text/bpe.h"

#include <bit>

namespace md {

void PairRankTable::reserve(std::size_t entries) {
  // Keep the load factor at or below one half.
  std::size_t capacity = 16;
  while (capacity < entries * 2) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmpty) {
      insert(static_cast<std::int32_t>(slot.key >> 32), static_cast<std::int32_t>(slot.key),
             slot.merge);
    }
  }
}

void PairRankTable::grow() {
  reserve(slots_.empty() ? 8 : slots_.size());
}

void PairRankTable::insert(std::int32_t left, std::int32_t right, BpeMerge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t key = make_key(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
    if (slots_[i].key == key) {
      slots_[i].merge = merge;
      return;
    }
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, merge};
      ++size_;
      return;
    }
  }
}

}  // namespace md
