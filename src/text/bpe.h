// Byte-pair-encoding core shared by the HF (pair-ranked merges) and tiktoken (byte-string ranks)
// tokenizers: merges the adjacent pair of lowest rank, leftmost first, until none applies.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

namespace md {

// One possible merge: its rank (lower merges first) and the token it produces.
struct BpeMerge {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t rank = kNone;
  std::int32_t id = -1;
  bool valid() const { return rank != kNone; }
};

// A run of bytes [begin, end) of the piece being encoded, currently the token `id`.
struct BpeSymbol {
  std::uint32_t begin;
  std::uint32_t end;
  std::int32_t id;
  std::int32_t prev;  // index of the symbol to the left, -1 at the start
  std::int32_t next;  // index of the symbol to the right, -1 at the end
};

// Merge table keyed by the pair of token ids, open addressing (it is probed for every adjacent
// pair of every piece, so it must be cheaper than std::unordered_map).
class PairRankTable {
 public:
  void reserve(std::size_t entries);
  // A pair inserted twice keeps the later merge, as HF's merge map does.
  void insert(std::int32_t left, std::int32_t right, BpeMerge merge);
  BpeMerge find(std::int32_t left, std::int32_t right) const {
    if (slots_.empty()) return {};
    const std::uint64_t key = make_key(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].merge;
      if (slots_[i].key == kEmpty) return {};
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = std::numeric_limits<std::uint64_t>::max();
  struct Slot {
    std::uint64_t key = kEmpty;
    BpeMerge merge;
  };
  static std::uint64_t make_key(std::int32_t left, std::int32_t right) {
    return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  }
  std::size_t slot_of(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

// `merge_of(left, right)` returns the BpeMerge for two adjacent symbols (invalid if none).
// Merges `symbols` (one per initial token, linked in order) in place and appends the final ids
// to `out`. Short pieces use a linear scan over cached pair ranks, long ones a min-heap, so that
// a 100 kB run stays O(n log n). Both pick the lowest rank, then the leftmost pair.
template <typename MergeOf>
void bpe_merge(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of,
               std::vector<std::int32_t>& out);

// Exposed for tests that check the two strategies agree.
template <typename MergeOf>
void bpe_merge_scan(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of);
template <typename MergeOf>
void bpe_merge_heap(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of);

// Builds the initial one-byte symbols of `piece`; `byte_id` maps a byte to its token.
template <typename ByteId>
void bpe_init_symbols(std::string_view piece, const ByteId& byte_id,
                      std::vector<BpeSymbol>& symbols) {
  symbols.clear();
  symbols.reserve(piece.size());
  const auto n = static_cast<std::int32_t>(piece.size());
  for (std::int32_t i = 0; i < n; ++i) {
    symbols.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + 1),
                       byte_id(static_cast<std::uint8_t>(piece[i])), i - 1,
                       i + 1 < n ? i + 1 : -1});
  }
}

// ---- implementation of the templates ----

namespace bpe_detail {

// Joins symbol `left` with its right neighbour into token `id`.
inline void join(std::vector<BpeSymbol>& symbols, std::int32_t left, std::int32_t id) {
  BpeSymbol& l = symbols[left];
  BpeSymbol& r = symbols[l.next];
  l.end = r.end;
  l.id = id;
  l.next = r.next;
  if (r.next >= 0) symbols[r.next].prev = left;
  r.id = -1;  // dead
}

constexpr std::size_t kScanLimit = 16;  // pieces up to this many bytes use the linear scan

}  // namespace bpe_detail

template <typename MergeOf>
void bpe_merge_scan(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of) {
  if (symbols.size() > bpe_detail::kScanLimit) return bpe_merge_heap(symbols, merge_of);
  // pair[i]: merge of live symbol i with its right neighbour.
  std::array<BpeMerge, bpe_detail::kScanLimit> pair;
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
    pair[i] = merge_of(symbols[i], symbols[i + 1]);
  while (true) {
    std::int32_t best = -1;
    std::uint32_t best_rank = BpeMerge::kNone;
    for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
      if (pair[i].rank < best_rank) {
        best_rank = pair[i].rank;
        best = i;
      }
    }
    if (best < 0) return;
    bpe_detail::join(symbols, best, pair[best].id);
    const BpeSymbol& b = symbols[best];
    pair[best] = b.next >= 0 ? merge_of(b, symbols[b.next]) : BpeMerge{};
    if (b.prev >= 0) pair[b.prev] = merge_of(symbols[b.prev], b);
  }
}

template <typename MergeOf>
void bpe_merge_heap(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of) {
  struct Candidate {
    std::uint32_t rank;
    std::uint32_t left_begin;  // ties go to the leftmost pair
    std::int32_t left;
    std::uint32_t left_end;  // the pair is stale if either side has grown since
    std::uint32_t right_end;
    std::int32_t id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left_begin > o.left_begin;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](std::int32_t left) {
    const BpeSymbol& l = symbols[left];
    if (l.next < 0) return;
    const BpeSymbol& r = symbols[l.next];
    const BpeMerge m = merge_of(l, r);
    if (m.valid()) heap.push({m.rank, l.begin, left, l.end, r.end, m.id});
  };
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const BpeSymbol& l = symbols[c.left];
    if (l.id < 0 || l.end != c.left_end || l.next < 0 || symbols[l.next].end != c.right_end)
      continue;
    bpe_detail::join(symbols, c.left, c.id);
    if (symbols[c.left].prev >= 0) consider(symbols[c.left].prev);
    consider(c.left);
  }
}

template <typename MergeOf>
void bpe_merge(std::vector<BpeSymbol>& symbols, const MergeOf& merge_of,
               std::vector<std::int32_t>& out) {
  if (symbols.empty()) return;
  if (symbols.size() <= bpe_detail::kScanLimit) {
    bpe_merge_scan(symbols, merge_of);
  } else {
    bpe_merge_heap(symbols, merge_of);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace md
