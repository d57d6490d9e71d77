#include "kernels/kv_block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace md::kernels {

namespace {

constexpr std::size_t kAlignment = 64;
// Slabs of about this size: few mappings (the kernel limits their number) and little address
// space left over per block size.
constexpr std::size_t kSlabBytes = std::size_t{2} << 20;

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// Makes [block, block + bytes) zeros again and hands its whole pages back to the system
// (MADV_DONTNEED: a private anonymous page is zero-filled when next touched); the partial pages
// at the ends, shared with neighbouring blocks, are cleared by hand.
void forget(std::byte* block, std::size_t bytes) {
  const std::size_t page = page_size();
  const auto first = reinterpret_cast<std::uintptr_t>(block);
  const std::uintptr_t last = first + bytes;
  const std::uintptr_t inner_first = round_up(first, page);
  const std::uintptr_t inner_last = last / page * page;
  if (inner_first >= inner_last ||
      madvise(reinterpret_cast<void*>(inner_first), inner_last - inner_first, MADV_DONTNEED) != 0) {
    std::memset(block, 0, bytes);
    return;
  }
  std::memset(block, 0, inner_first - first);
  std::memset(reinterpret_cast<void*>(inner_last), 0, last - inner_last);
}

}  // namespace

KvBlockPool::~KvBlockPool() {
  for (auto& [bytes, size_class] : classes_) {
    for (auto [address, length] : size_class.slabs) munmap(address, length);
  }
}

KvBlockPool& KvBlockPool::shared() {
  // Never destroyed: caches in static objects may still give blocks back at exit.
  static auto* pool = new KvBlockPool;
  return *pool;
}

void KvBlockPool::add_slab(SizeClass& size_class, std::size_t bytes) {
  const std::size_t blocks = std::max<std::size_t>(1, kSlabBytes / bytes);
  const std::size_t length = round_up(blocks * bytes, page_size());
  void* address = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) throw std::bad_alloc();
  auto* slab = static_cast<std::byte*>(address);
  size_class.slabs.emplace_back(slab, length);
  // Handed out from the front, so a slab's pages are touched in order.
  for (std::size_t i = blocks; i-- > 0;) size_class.free.push_back(slab + i * bytes);
}

void* KvBlockPool::allocate(std::size_t bytes) {
  bytes = round_up(std::max<std::size_t>(bytes, 1), kAlignment);
  std::lock_guard lock(mutex_);
  SizeClass& size_class = classes_[bytes];
  if (size_class.free.empty()) add_slab(size_class, bytes);
  std::byte* block = size_class.free.back();
  size_class.free.pop_back();
  ++use_.blocks;
  use_.bytes += bytes;
  use_.peak_bytes = std::max(use_.peak_bytes, use_.bytes);
  return block;
}

void KvBlockPool::free(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  bytes = round_up(std::max<std::size_t>(bytes, 1), kAlignment);
  // Outside the lock: the system call is the slow part, and the block is nobody's now.
  forget(static_cast<std::byte*>(block), bytes);
  std::lock_guard lock(mutex_);
  classes_[bytes].free.push_back(static_cast<std::byte*>(block));
  --use_.blocks;
  use_.bytes -= bytes;
}

KvPoolUse KvBlockPool::use() const {
  std::lock_guard lock(mutex_);
  return use_;
}

}  // namespace md::kernels
