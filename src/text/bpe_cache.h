// Memo of piece -> token ids for the BPE tokenizers: common words skip the merge loop. Each
// thread has its own table, so lookups take no lock.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace md {

class BpeCache {
 public:
  // Pieces longer than this are not cached (rare, and would crowd out common words).
  static constexpr std::size_t kMaxPieceBytes = 48;

  // `capacity`: entries per thread; a full table stops growing (no eviction: the words seen
  // first in a process are typically the common ones).
  explicit BpeCache(std::size_t capacity = 1u << 15);

  // Appends the cached ids for `piece` to `out` and returns true, or returns false.
  bool lookup(std::string_view piece, std::vector<std::int32_t>& out) const;
  void store(std::string_view piece, const std::int32_t* ids, std::size_t count) const;

 private:
  struct Table;
  Table& table() const;  // this thread's table for this cache

  std::uint64_t serial_;  // unique per BpeCache, never reused, keys the per-thread tables
  std::size_t capacity_;
};

}  // namespace md
