#include "kernels/kv_block_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace md::kernels {
namespace {

bool all_zero(const void* block, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(block);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Resident pages of [block, block + bytes) that lie wholly inside it.
std::size_t resident_inner_pages(const void* block, std::size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = (reinterpret_cast<std::uintptr_t>(block) + page - 1) / page * page;
  const auto last = (reinterpret_cast<std::uintptr_t>(block) + bytes) / page * page;
  if (first >= last) return 0;
  std::vector<unsigned char> resident((last - first) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(first), last - first, resident.data()), 0);
  std::size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return n;
}

TEST(KvBlockPool, BlocksAreZeroAlignedAndCounted) {
  KvBlockPool pool;
  std::vector<void*> blocks;
  for (int i = 0; i < 300; ++i) {  // more than one slab of 12 KiB blocks
    void* block = pool.allocate(12288);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(block) % 64, 0u);
    ASSERT_TRUE(all_zero(block, 12288));
    std::memset(block, 0x5a, 12288);
    blocks.push_back(block);
  }
  EXPECT_EQ(pool.use().blocks, 300u);
  EXPECT_EQ(pool.use().bytes, 300u * 12288);
  for (void* block : blocks) pool.free(block, 12288);
  EXPECT_EQ(pool.use().blocks, 0u);
  EXPECT_EQ(pool.use().bytes, 0u);
  EXPECT_EQ(pool.use().peak_bytes, 300u * 12288);
}

// A freed block is zeros when handed out again, whatever its size and alignment to pages, and
// its whole pages are no longer resident: the memory went back to the system.
TEST(KvBlockPool, AFreedBlockIsZeroAgainAndItsPagesGoBack) {
  KvBlockPool pool;
  for (std::size_t bytes : {std::size_t{1000}, std::size_t{12288}, std::size_t{65536 + 192}}) {
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) {
      blocks.push_back(pool.allocate(bytes));
      std::memset(blocks.back(), 0xff, bytes);
    }
    std::size_t resident = 0;
    for (void* block : blocks) resident += resident_inner_pages(block, bytes);
    for (void* block : blocks) pool.free(block, bytes);
    std::size_t after = 0;
    for (void* block : blocks) after += resident_inner_pages(block, bytes);
    if (bytes >= 12288) {
      EXPECT_GT(resident, 0u) << bytes;
    }
    EXPECT_EQ(after, 0u) << bytes;
    for (int i = 0; i < 8; ++i) {
      void* again = pool.allocate(bytes);
      ASSERT_TRUE(all_zero(again, bytes)) << bytes;
    }
  }
}

}  // namespace
}  // namespace md::kernels
