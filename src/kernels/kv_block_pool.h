// Where every KV cache's memory comes from: fixed-size blocks carved from page-aligned slabs,
// shared by all sequences of the process (the server's pool). A block is zeros when handed out,
// and a freed block's pages go back to the system at once, so the resident KV memory follows the
// positions sequences actually hold, not their capacity. The pool counts what is in use; the
// budget is enforced before a sequence starts (engine::BatchScheduler reserves its worst case),
// never by failing an allocation inside a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace md::kernels {

struct KvPoolUse {
  std::size_t blocks = 0;      // blocks handed out and not freed
  std::size_t bytes = 0;       // their bytes
  std::size_t peak_bytes = 0;  // the most `bytes` has been
};

class KvBlockPool {
 public:
  KvBlockPool() = default;
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;
  ~KvBlockPool();

  // The process's pool: every KvCache takes its blocks here unless given another.
  static KvBlockPool& shared();

  // A block of `bytes` zero bytes, 64-byte aligned. Thread-safe.
  void* allocate(std::size_t bytes);
  // Gives back a block that allocate(bytes) returned. Thread-safe.
  void free(void* block, std::size_t bytes);

  KvPoolUse use() const;

 private:
  // Blocks of one size: slabs cut into them, and the ones free now.
  struct SizeClass {
    std::vector<std::byte*> free;
    std::vector<std::pair<std::byte*, std::size_t>> slabs;  // address, length
  };
  void add_slab(SizeClass& size_class, std::size_t bytes);

  mutable std::mutex mutex_;
  std::map<std::size_t, SizeClass> classes_;
  KvPoolUse use_;
};

}  // namespace md::kernels
