// The DFlash2 drafter on its target's executors: with the target's worker count its fused round
// borrows the target's persistent team instead of starting a second one (tiny-dflash2 on the
// tiny-qwen38 fixture).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../qwen38/qwen38_test_util.h"
#include "models/drafters/dflash2/dflash2_drafter.h"

namespace md::test {
namespace {

std::string drafter_dir() {
  return std::string(MD_GOLDEN_DIR) + "/dflash2/tiny-dflash2";
}

int64_t threads_in_process() {
  auto tasks = std::filesystem::directory_iterator("/proc/self/task");
  return std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks));
}

// The drafter's fused round runs on the target's persistent team when their worker counts match,
// so speculation starts no second team (which would spin against the first on the same cores);
// with another count it needs, and starts, its own.
TEST(DFlash2Speculative, TheDrafterRunsOnTheTargetsTeam) {
  auto model = load_fixture("tiny-qwen38", KvCacheType::kF32, {}, 2);
  std::unique_ptr<SpeculativeDrafter> same =
      load_dflash2_drafter(drafter_dir(), model->target_view(), 2);
  std::unique_ptr<SpeculativeDrafter> other =
      load_dflash2_drafter(drafter_dir(), model->target_view(), 3);
  std::vector<float> taps(5 * 128, 0.25f);
  same->append_context(taps, 1);
  other->append_context(taps, 1);
  int64_t before = threads_in_process();
  same->propose(7, 0.0f, {});
  EXPECT_EQ(threads_in_process(), before);
  other->propose(7, 0.0f, {});
  EXPECT_EQ(threads_in_process(), before + 2);  // a team of 3: the caller and two workers
}

}  // namespace
}  // namespace md::test
