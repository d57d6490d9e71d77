#include "kernels/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

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

// A copy copies only what was written, yet equals the original everywhere: the rest is zeros in
// both. Checked element by element over the whole capacity, for both cache types, also after the
// source was rewritten shorter (rows past the new length but once written are copied too).
TEST(KvCache, ACopyEqualsTheOriginalEverywhere) {
  const int64_t heads = 3, capacity = 64, dim = 8;
  for (KvCacheType type : {KvCacheType::kF32, KvCacheType::kBf16}) {
    KvCache cache(type, heads, capacity, dim);
    fill(cache, heads, 20, 1);
    fill(cache, heads, 5, 2);  // a reset sequence, written again to a shorter length
    EXPECT_EQ(cache.written(), 20);
    const KvCache copy = cache;
    EXPECT_EQ(copy.written(), 20);
    std::vector<float> q = test::random_floats(dim, 9, 1.0f), scores(capacity);
    std::vector<float> a(dim), b(dim);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{20}, capacity}) {
        cache.attend(h, n, q.data(), 0.3f, scores.data(), a.data());
        copy.attend(h, n, q.data(), 0.3f, scores.data(), b.data());
        EXPECT_EQ(a, b) << "head " << h << ", " << n << " keys";
      }
    }
    if (type == KvCacheType::kF32) {
      for (std::size_t i = 0; i < cache.keys_f32().size(); ++i) {
        ASSERT_EQ(cache.keys_f32()[i], copy.keys_f32()[i]) << i;
        ASSERT_EQ(cache.values_f32()[i], copy.values_f32()[i]) << i;
      }
    }
  }
}

// A copy is memory of its own: what the source writes after the copy does not show in it.
TEST(KvCache, ACopyIsIndependentOfItsSource) {
  KvCache cache(KvCacheType::kF32, 1, 16, 4);
  fill(cache, 1, 3, 4);
  KvCache copy = cache;
  fill(cache, 1, 6, 5);
  EXPECT_EQ(copy.written(), 3);
  EXPECT_EQ(copy.keys_f32()[4 * 4], 0.0f);  // position 4: written in the source after the copy
  EXPECT_NE(cache.keys_f32()[4 * 4], 0.0f);
}

// Released, a cache reads as new (zeros everywhere, nothing written) and takes writes again; its
// pages go back to the system. Large enough (1 MiB per array) that whole pages are released.
TEST(KvCache, ReleaseForgetsEveryPositionAndGivesTheMemoryBack) {
  const int64_t heads = 2, capacity = 2048, dim = 64;
  KvCache cache(KvCacheType::kF32, heads, capacity, dim);
  fill(cache, heads, 1500, 3);
  cache.release();
  EXPECT_EQ(cache.written(), 0);
  for (std::size_t i = 0; i < cache.keys_f32().size(); ++i) {
    ASSERT_EQ(cache.keys_f32()[i], 0.0f) << i;
    ASSERT_EQ(cache.values_f32()[i], 0.0f) << i;
  }
  fill(cache, heads, 10, 4);
  KvCache fresh(KvCacheType::kF32, heads, capacity, dim);
  fill(fresh, heads, 10, 4);
  for (std::size_t i = 0; i < cache.keys_f32().size(); ++i) {
    ASSERT_EQ(cache.keys_f32()[i], fresh.keys_f32()[i]) << i;
  }
  EXPECT_EQ(KvCache(cache).written(), 10);
}

TEST(ZeroedArray, ReleaseZeroesExactlyTheRangeWhateverItsAlignment) {
  ZeroedArray<float> array(10000);
  for (std::size_t i = 0; i < array.size(); ++i) array[i] = 1.0f + static_cast<float>(i);
  array.release(3, 9001);     // unaligned at both ends, several whole pages inside
  array.release(9500, 9510);  // no whole page inside
  for (std::size_t i = 0; i < array.size(); ++i) {
    const bool released = (i >= 3 && i < 9001) || (i >= 9500 && i < 9510);
    ASSERT_EQ(array[i], released ? 0.0f : 1.0f + static_cast<float>(i)) << i;
  }
}

}  // namespace
}  // namespace md::kernels
