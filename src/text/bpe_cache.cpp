#include "text/bpe_cache.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

namespace md {
namespace {

std::atomic<std::uint64_t> g_next_serial{1};

// A thread keeps tables for this many caches (tokenizers) at most; older ones are dropped.
constexpr std::size_t kTablesPerThread = 4;

std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    h = (h ^ word) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  std::uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

}  // namespace

// Open addressing over slots that point into two arenas (piece bytes and ids).
struct BpeCache::Table {
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t bytes_at = 0;
    std::uint32_t ids_at = 0;
    std::uint16_t bytes_len = 0;
    std::uint16_t ids_len = 0;  // 0 marks an empty slot (a cached piece has at least one id)
  };
  std::vector<Slot> slots = std::vector<Slot>(1024);
  std::string bytes;
  std::vector<std::int32_t> ids;
  std::size_t size = 0;

  const Slot* find(std::string_view piece, std::uint64_t h) const {
    const std::size_t mask = slots.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.ids_len == 0) return nullptr;
      if (s.hash == h && s.bytes_len == piece.size() &&
          std::memcmp(bytes.data() + s.bytes_at, piece.data(), piece.size()) == 0) {
        return &s;
      }
    }
  }

  void place(const Slot& slot) {
    const std::size_t mask = slots.size() - 1;
    std::size_t i = slot.hash & mask;
    while (slots[i].ids_len != 0) i = (i + 1) & mask;
    slots[i] = slot;
  }

  void grow() {
    std::vector<Slot> old(slots.size() * 2);
    old.swap(slots);
    for (const Slot& s : old) {
      if (s.ids_len != 0) place(s);
    }
  }
};

BpeCache::BpeCache(std::size_t capacity)
    : serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)), capacity_(capacity) {}

BpeCache::Table& BpeCache::table() const {
  struct Entry {
    std::uint64_t serial;
    std::unique_ptr<Table> table;
  };
  thread_local std::vector<Entry> tables;
  for (Entry& e : tables) {
    if (e.serial == serial_) return *e.table;
  }
  if (tables.size() >= kTablesPerThread) tables.erase(tables.begin());
  tables.push_back({serial_, std::make_unique<Table>()});
  return *tables.back().table;
}

bool BpeCache::lookup(std::string_view piece, std::vector<std::int32_t>& out) const {
  const Table& t = table();
  const Table::Slot* s = t.find(piece, hash_bytes(piece));
  if (!s) return false;
  out.insert(out.end(), t.ids.begin() + s->ids_at, t.ids.begin() + s->ids_at + s->ids_len);
  return true;
}

void BpeCache::store(std::string_view piece, const std::int32_t* ids, std::size_t count) const {
  Table& t = table();
  if (t.size >= capacity_ || count == 0 || piece.size() > kMaxPieceBytes) return;
  const std::uint64_t h = hash_bytes(piece);
  if (t.find(piece, h)) return;
  if ((t.size + 1) * 2 > t.slots.size()) t.grow();
  Table::Slot slot;
  slot.hash = h;
  slot.bytes_at = static_cast<std::uint32_t>(t.bytes.size());
  slot.ids_at = static_cast<std::uint32_t>(t.ids.size());
  slot.bytes_len = static_cast<std::uint16_t>(piece.size());
  slot.ids_len = static_cast<std::uint16_t>(count);
  t.bytes.append(piece);
  t.ids.insert(t.ids.end(), ids, ids + count);
  t.place(slot);
  ++t.size;
}

}  // namespace md
