#include "kernels/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/attention.h"

namespace md::kernels {
namespace {

// Writes positions [0, n) of every head with values that differ by head and position.
void fill(KvCache& cache, int64_t heads, int64_t n, int seed) {
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> k = test::random_floats(cache.head_dim(), seed + 1000 * h + p, 1.0f);
      std::vector<float> v = test::random_floats(cache.head_dim(), seed + 7 + 1000 * h + p, 1.0f);
      cache.write(h, p, k.data(), v.data());
    }
  }
}

// A copy equals the original everywhere (positions never written are zeros in both), for both
// cache types, also after the source was rewritten shorter (rows past the new length but once
// written stay).
TEST(KvCache, ACopyEqualsTheOriginalEverywhere) {
  const int64_t heads = 3, capacity = 64, dim = 8;
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kBf16}) {
    KvCache cache(type, heads, capacity, dim);
    fill(cache, heads, 20, 1);
    fill(cache, heads, 5, 2);  // a reset sequence, written again to a shorter length
    EXPECT_EQ(cache.written(), 20);
    const KvCache copy = cache;
    EXPECT_EQ(copy.written(), 20);
    std::vector<float> q = test::random_floats(dim, 9, 1.0f);
    std::vector<float> a(dim), b(dim);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{20}, capacity}) {
        cache.attend(h, n, q.data(), 0.3f, a.data());
        copy.attend(h, n, q.data(), 0.3f, b.data());
        EXPECT_EQ(a, b) << "head " << h << ", " << n << " keys";
      }
    }
    EXPECT_EQ(cache.keys_f32(), copy.keys_f32());
    EXPECT_EQ(cache.values_f32(), copy.values_f32());
  }
}

// Copy on write, both ways: what either side writes after the copy does not show in the other.
TEST(KvCache, ACopyAndItsSourceNeverSeeEachOthersWrites) {
  KvCache cache(KvCacheType::kF32, 1, 64, 4);
  fill(cache, 1, 3, 4);
  const std::vector<float> before = cache.keys_f32();
  KvCache copy = cache;
  fill(cache, 1, 6, 5);
  EXPECT_EQ(copy.written(), 3);
  EXPECT_EQ(copy.keys_f32(), before);
  EXPECT_NE(cache.keys_f32()[4 * 4], 0.0f);  // position 4: written in the source after the copy
  const std::vector<float> source = cache.keys_f32();
  fill(copy, 1, 40, 6);  // into the shared block, then into blocks of its own
  EXPECT_EQ(cache.keys_f32(), source);
  EXPECT_NE(copy.keys_f32()[0], source[0]);
}

// Memory follows the positions written, in whole blocks, whatever the capacity.
TEST(KvCache, MemoryFollowsTheWrittenLengthInBlocks) {
  KvBlockPool pool;
  KvCache cache(KvCacheType::kBf16, 2, 4096, 64, &pool);
  EXPECT_EQ(cache.bytes(), 0u);
  fill(cache, 2, KvCache::kBlockPositions + 1, 1);
  EXPECT_EQ(cache.block_bytes(), 2u * 2 * KvCache::kBlockPositions * 64 * sizeof(uint16_t));
  EXPECT_EQ(cache.bytes(), 2 * cache.block_bytes());
  EXPECT_EQ(pool.use().blocks, 2u);
  EXPECT_EQ(pool.use().bytes, 2 * cache.block_bytes());
}

// A copy takes no block; a write into a shared block copies that one block only; a block goes
// back to the pool when its last holder lets go.
TEST(KvCache, ACopySharesEveryBlockUntilOneIsWritten) {
  KvBlockPool pool;
  const int64_t heads = 2, dim = 8, block = KvCache::kBlockPositions;
  KvCache cache(KvCacheType::kF32, heads, 256, dim, &pool);
  fill(cache, heads, 2 * block + 8, 1);  // two full blocks and half of a third
  EXPECT_EQ(pool.use().blocks, 3u);
  {
    KvCache copy = cache;
    EXPECT_EQ(pool.use().blocks, 3u);
    std::vector<float> k(dim, 1.0f), v(dim, 2.0f);
    copy.write(0, 2 * block + 8, k.data(), v.data());  // the shared half-full block: copied
    EXPECT_EQ(pool.use().blocks, 4u);
    copy.write(1, 2 * block + 8, k.data(), v.data());   // now its own
    cache.write(0, 2 * block + 8, k.data(), v.data());  // the source holds the old one alone
    EXPECT_EQ(pool.use().blocks, 4u);
    copy.write(0, 3 * block, k.data(), v.data());  // a new block
    EXPECT_EQ(pool.use().blocks, 5u);
  }
  EXPECT_EQ(pool.use().blocks, 3u);
  cache.release();
  EXPECT_EQ(pool.use().blocks, 0u);
  EXPECT_EQ(pool.use().bytes, 0u);
}

// The n choices of a prompt (the source and its copies) write their next positions from several
// threads at once, each head by its own task, into the block they all share, while the other
// holders copy it and let go of it: every cache ends with exactly the prompt and its own writes,
// and the shared block exists once per holder. Repeated: the interleavings differ each time.
TEST(KvCache, ConcurrentWritesIntoASharedBlockCopyItOncePerHolder) {
  const int64_t heads = 4, dim = 256, prompt = KvCache::kBlockPositions + 5, capacity = 64;
  for (int round = 0; round < 100; ++round) {
    KvBlockPool pool;
    KvCache source(KvCacheType::kF32, heads, capacity, dim, &pool);
    fill(source, heads, prompt, 3);
    const std::vector<float> prompt_keys = source.keys_f32();
    std::vector<KvCache> caches(7, source);
    caches[0] = std::move(source);
    std::vector<std::thread> threads;
    for (std::size_t c = 0; c < caches.size(); ++c) {
      for (int64_t h = 0; h < heads; ++h) {
        threads.emplace_back([&, c, h] {
          for (int64_t p = prompt; p < prompt + 8; ++p) {
            std::vector<float> k(dim, static_cast<float>(c * 1000 + h * 100 + p)), v = k;
            caches[c].write(h, p, k.data(), v.data());
          }
        });
      }
    }
    for (std::thread& t : threads) t.join();
    // Block 0 shared by all seven; block 1 once per holder.
    ASSERT_EQ(pool.use().blocks, 1u + 7u);
    for (std::size_t c = 0; c < caches.size(); ++c) {
      const std::vector<float> keys = caches[c].keys_f32();
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t p = 0; p < capacity; ++p) {
          const auto at = static_cast<std::size_t>((h * capacity + p) * dim);
          const float expected = p < prompt       ? prompt_keys[at]
                                 : p < prompt + 8 ? static_cast<float>(c * 1000 + h * 100 + p)
                                                  : 0.0f;
          ASSERT_EQ(keys[at], expected)
              << "round " << round << " cache " << c << " head " << h << " position " << p;
        }
      }
    }
  }
}

// Attention over the blocks is the contiguous kernel over the same keys, bitwise, for key counts
// on and off block boundaries.
TEST(KvCache, AttendEqualsTheContiguousKernelBitwise) {
  const int64_t heads = 2, capacity = 80, dim = 24;
  KvCache cache(KvCacheType::kF32, heads, capacity, dim);
  fill(cache, heads, capacity, 7);
  const std::vector<float> keys = cache.keys_f32(), values = cache.values_f32();
  std::vector<float> q = test::random_floats(dim, 5, 1.0f), a(dim), b(dim);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t n = 1; n <= capacity; n += 3) {
      cache.attend(h, n, q.data(), 0.2f, a.data());
      const float* k = keys.data() + h * capacity * dim;
      const float* v = values.data() + h * capacity * dim;
      attend(q.data(), k, v, n, dim, dim, 0.2f, b.data());
      ASSERT_EQ(a, b) << "head " << h << ", " << n << " keys";
    }
  }
}

// Released, a cache reads as new (zeros everywhere, nothing written) and takes writes again; its
// blocks go back to the pool.
TEST(KvCache, ReleaseForgetsEveryPositionAndGivesTheMemoryBack) {
  KvBlockPool pool;
  const int64_t heads = 2, capacity = 2048, dim = 64;
  KvCache cache(KvCacheType::kF32, heads, capacity, dim, &pool);
  fill(cache, heads, 1500, 3);
  EXPECT_GT(pool.use().bytes, 1500u * heads * dim * 2 * sizeof(float) - 1);
  cache.release();
  EXPECT_EQ(cache.written(), 0);
  EXPECT_EQ(pool.use().bytes, 0u);
  const std::vector<float> zeros(static_cast<std::size_t>(heads * capacity * dim), 0.0f);
  EXPECT_EQ(cache.keys_f32(), zeros);
  EXPECT_EQ(cache.values_f32(), zeros);
  fill(cache, heads, 10, 4);
  KvCache fresh(KvCacheType::kF32, heads, capacity, dim, &pool);
  fill(fresh, heads, 10, 4);
  EXPECT_EQ(cache.keys_f32(), fresh.keys_f32());
  EXPECT_EQ(cache.values_f32(), fresh.values_f32());
  EXPECT_EQ(KvCache(cache).written(), 10);
}

// A copy truncated to a position (a sequence going back there) lets go of the blocks past it;
// the source keeps them; attention over the kept positions is bitwise what it was, and writing
// on from the position gives what a cache written that way from the start gives.
TEST(KvCache, TruncateLetsGoOfTheBlocksPastThePosition) {
  KvBlockPool pool;
  const int64_t heads = 2, dim = 8, block = KvCache::kBlockPositions;
  KvCache cache(KvCacheType::kF32, heads, 256, dim, &pool);
  fill(cache, heads, 5 * block, 1);
  KvCache copy = cache;
  const int64_t position = 2 * block + 3;
  copy.truncate(position);
  EXPECT_EQ(copy.bytes(), 3 * copy.block_bytes());
  EXPECT_EQ(copy.written(), 3 * block);
  EXPECT_EQ(pool.use().blocks, 5u);  // all still the source's
  std::vector<float> q = test::random_floats(dim, 9, 1.0f), a(dim), b(dim);
  for (int64_t h = 0; h < heads; ++h) {
    cache.attend(h, position, q.data(), 0.3f, a.data());
    copy.attend(h, position, q.data(), 0.3f, b.data());
    EXPECT_EQ(a, b) << "head " << h;
  }
  // Going on from the position: what a cache that held only the first `position` gives.
  KvCache fresh(KvCacheType::kF32, heads, 256, dim, &pool);
  fill(fresh, heads, position, 1);
  for (int64_t p = position; p < 4 * block; ++p) {
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> k = test::random_floats(dim, 50 + p + 100 * h, 1.0f);
      copy.write(h, p, k.data(), k.data());
      fresh.write(h, p, k.data(), k.data());
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t n : {position, position + 1, 4 * block}) {
      copy.attend(h, n, q.data(), 0.3f, a.data());
      fresh.attend(h, n, q.data(), 0.3f, b.data());
      EXPECT_EQ(a, b) << "head " << h << ", " << n << " keys";
    }
  }
  cache.release();
  copy.truncate(0);
  EXPECT_EQ(copy.bytes(), 0u);
  EXPECT_EQ(copy.written(), 0);
}

}  // namespace
}  // namespace md::kernels
